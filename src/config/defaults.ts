/**
 * The server's defaults that a setting (config/settings.ts) states and code
 * below it applies when the setting is not given: one home for each, so that
 * the settings table, docs/configuration.md (generated from it) and the code
 * cannot disagree (test/docs/stated-defaults.test.ts).
 */
export const SERVER_DEFAULTS = {
  /** SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 connection (server/http2-limits.ts). */
  http2MaxConcurrentStreams: 256,
  /** A request's headers must arrive within this (server/http1-timeouts.ts); a slowloris guard. */
  requestHeadersTimeoutMs: 30_000,
  /** A whole request, body included, must arrive within this; bodies are small. */
  requestTimeoutMs: 60_000,
  /** An idle keep-alive connection is closed after this: longer than the 60 s idle timeout of common load balancers. */
  keepAliveTimeoutMs: 65_000,
  /** WatchEvents streams at once (dispatch/event-feed.ts); one more is refused. */
  maxWatchers: 1000,
  /** Unread bytes a WatchEvents client may leave in its connection before it is dropped. */
  watchMaxPendingBytes: 1024 * 1024,
  /** PostgreSQL connections per server. */
  databasePoolSize: 10,
  /** PostgreSQL's statement_timeout for the server's statements. */
  databaseStatementTimeoutMs: 30_000,
} as const;
