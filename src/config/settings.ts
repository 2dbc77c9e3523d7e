/**
 * The settings table: every setting of `leasequeue serve` with its
 * environment variable, its flag, its default and the values it takes
 * (values.ts holds the bounds). resolveConfig (config.ts) parses with it,
 * `--help` and docs/configuration.md are written from it
 * (settings-text.ts), so a default or a bound is typed here only.
 */
import { SERVER_DEFAULTS } from "./defaults.js";
import { formatDurationText } from "../domain/duration-text.js";
import { DEFAULTS } from "../domain/request-bounds.js";
import { DEFAULT_RETENTION } from "../domain/retention.js";
import {
  choice,
  duration,
  integer,
  nonEmptyText,
  port,
  postgresUrl,
  requestCompressions,
  schemaName,
  text,
  zeroOrMilliseconds,
  type ValueKind,
} from "./values.js";

export interface Setting<T = unknown> {
  /** The environment variable; an empty one counts as unset. */
  env: string;
  /** The flag, without its dashes. A flag wins over the variable. */
  flag: string;
  /** The value when neither is set, as text; "" when unset means something else (see `unset`). */
  default: string;
  /** What the setting does when it is unset and has no default (e.g. "same as host"). */
  unset?: string;
  /** The values it takes. */
  value: ValueKind<T>;
  /** What it does, in a line (`--help`; docs/configuration.md begins with it). */
  help: string;
  /** More for docs/configuration.md (Markdown). */
  details?: string;
}

/** Timeouts of the API port: whole milliseconds from 100 ms to an hour. */
const TIMEOUT_MS = integer(100, 3_600_000, "milliseconds", "ms");

/** Longest retention accepted: 100 years, far beyond any use and far from overflowing a timestamp. */
const MAX_RETENTION_MS = 100 * 365 * 86_400_000;

const ON_OFF = choice(["on", "off"]);

/** Every setting, in the order of `--help` and docs/configuration.md. */
export const SETTINGS = {
  databasePath: {
    env: "LEASEQUEUE_DATABASE_PATH",
    flag: "db",
    default: "leasequeue.db",
    value: nonEmptyText("a file path"),
    help: "SQLite database file",
  },
  databaseUrl: {
    env: "LEASEQUEUE_DATABASE_URL",
    flag: "database-url",
    default: "",
    unset: "SQLite",
    value: postgresUrl(),
    help: "use PostgreSQL instead of the SQLite file; several servers may share it",
    details:
      "`sslmode` and the other libpq parameters go in the URL's query. It selects the PostgreSQL store, and then `LEASEQUEUE_DATABASE_PATH` is ignored (`--db` together with `--database-url` is refused). The password is never logged. See [Running several servers](postgresql.md#running-several-servers)",
  },
  databaseSchema: {
    env: "LEASEQUEUE_DATABASE_SCHEMA",
    flag: "database-schema",
    default: "leasequeue",
    value: schemaName(),
    help: "PostgreSQL schema of LeaseQueue's tables and of the submit() function",
    details: "PostgreSQL only",
  },
  databasePoolSize: {
    env: "LEASEQUEUE_DATABASE_POOL_SIZE",
    flag: "database-pool-size",
    default: String(SERVER_DEFAULTS.databasePoolSize),
    value: integer(1, 1000, "a connection count"),
    help: "most PostgreSQL connections per server, plus one that listens for other servers' commits",
    details: "PostgreSQL only",
  },
  databaseStatementTimeoutMs: {
    env: "LEASEQUEUE_DATABASE_STATEMENT_TIMEOUT_MS",
    flag: "database-statement-timeout-ms",
    default: String(SERVER_DEFAULTS.databaseStatementTimeoutMs),
    value: zeroOrMilliseconds(100, 3_600_000),
    help: "PostgreSQL cancels a statement of the server's that runs longer (its statement_timeout); 0 = no limit",
    details: "PostgreSQL only",
  },
  host: {
    env: "LEASEQUEUE_HOST",
    flag: "host",
    default: "127.0.0.1",
    value: text("a host name or IP address"),
    help: "API listener address",
  },
  port: {
    env: "LEASEQUEUE_PORT",
    flag: "port",
    default: "8080",
    value: port(),
    help: "API port (gRPC, gRPC-Web, Connect); 0 = any free port",
    details: "With 0, the log line `api listening` names the port taken",
  },
  metricsHost: {
    env: "LEASEQUEUE_METRICS_HOST",
    flag: "metrics-host",
    default: "",
    unset: "same as host",
    value: text("a host name or IP address"),
    help: "side listener address",
    details: "See [Side port](api.md#side-port)",
  },
  metricsPort: {
    env: "LEASEQUEUE_METRICS_PORT",
    flag: "metrics-port",
    default: "9464",
    value: port(),
    help: "side port (/metrics, /health/*); 0 = any free port",
  },
  environment: {
    env: "LEASEQUEUE_ENVIRONMENT",
    flag: "environment",
    default: "development",
    value: choice(["development", "production"]),
    help: "production turns gRPC reflection and /docs off unless their settings turn them on",
  },
  wire: {
    env: "LEASEQUEUE_WIRE",
    flag: "wire",
    default: "fast",
    value: choice(["fast", "library"]),
    help: "library serves every call through connect-es's and protobuf-es's own code instead of the server's hand-written wire paths, for diagnosis",
    details: "See [The fast wire](performance.md#the-fast-wire); `fast` is what the figures are measured on",
  },
  maxRequestBytes: {
    env: "LEASEQUEUE_MAX_REQUEST_BYTES",
    flag: "max-request-bytes",
    default: String(DEFAULTS.maxRequestBytes),
    value: integer(1024, 64 * 1024 * 1024, "a byte count", "bytes"),
    help: "largest request body accepted, as sent and after decompression",
    details: "See [Limits at the edge](../SECURITY.md#limits-at-the-edge)",
  },
  reflection: {
    env: "LEASEQUEUE_REFLECTION",
    flag: "reflection",
    default: "",
    unset: "on, or off in production",
    value: ON_OFF,
    help: "gRPC reflection on the API port",
  },
  docs: {
    env: "LEASEQUEUE_DOCS",
    flag: "docs",
    default: "",
    unset: "on, or off in production",
    value: ON_OFF,
    help: "the API reference at /docs on the API port (read and try every RPC; off: /docs is 404)",
    details: "See [API reference at `/docs`](api.md#api-reference-at-docs)",
  },
  sqliteSynchronous: {
    env: "LEASEQUEUE_SQLITE_SYNCHRONOUS",
    flag: "sqlite-synchronous",
    default: "full",
    value: choice(["full", "normal"]),
    help: "full: answer after an fsync of each commit; normal: no fsync per commit",
    details:
      "With `full` the fsync is shared by all commits of that moment and runs off the event loop; a read may see a commit a few milliseconds before its fsync returns, so on power loss in that window it is lost with its unsent answer. With `normal` a killed process loses nothing, a power loss may take the last commits",
  },
  tlsCert: {
    env: "LEASEQUEUE_TLS_CERT",
    flag: "tls-cert",
    default: "",
    unset: "no TLS",
    value: text("a file path"),
    help: "PEM certificate file; enables TLS with --tls-key",
    details:
      "With `--tls-key` the API port speaks TLS, ALPN h2 and http/1.1; one without the other is refused. See [TLS](../SECURITY.md#tls)",
  },
  tlsKey: {
    env: "LEASEQUEUE_TLS_KEY",
    flag: "tls-key",
    default: "",
    unset: "no TLS",
    value: text("a file path"),
    help: "PEM private key file",
  },
  logLevel: {
    env: "LEASEQUEUE_LOG_LEVEL",
    flag: "log-level",
    default: "info",
    value: choice(["debug", "info", "warn", "error"]),
    help: "the least severe log lines written (JSON lines on stdout)",
  },
  requestCompression: {
    env: "LEASEQUEUE_REQUEST_COMPRESSION",
    flag: "request-compression",
    default: "gzip",
    value: requestCompressions(),
    help: "request encodings accepted",
    details: "See [Limits at the edge](../SECURITY.md#limits-at-the-edge)",
  },
  responseCompression: {
    env: "LEASEQUEUE_RESPONSE_COMPRESSION",
    flag: "response-compression",
    default: "off",
    value: ON_OFF,
    help: "on: responses of 1 KiB or more gzip-compressed for clients that accept it",
    details: "Off by default: on a LAN the CPU costs more than the bytes save (about 6% of the server's CPU in a batched run)",
  },
  http2MaxConcurrentStreams: {
    env: "LEASEQUEUE_HTTP2_MAX_CONCURRENT_STREAMS",
    flag: "http2-max-concurrent-streams",
    default: String(SERVER_DEFAULTS.http2MaxConcurrentStreams),
    value: integer(1, 10_000, "a stream count"),
    help: "most concurrent streams per HTTP/2 connection",
  },
  requestHeadersTimeoutMs: {
    env: "LEASEQUEUE_REQUEST_HEADERS_TIMEOUT_MS",
    flag: "request-headers-timeout-ms",
    default: String(SERVER_DEFAULTS.requestHeadersTimeoutMs),
    value: TIMEOUT_MS,
    help: "a request's headers must arrive within this",
    details: "At most `LEASEQUEUE_REQUEST_TIMEOUT_MS`",
  },
  requestTimeoutMs: {
    env: "LEASEQUEUE_REQUEST_TIMEOUT_MS",
    flag: "request-timeout-ms",
    default: String(SERVER_DEFAULTS.requestTimeoutMs),
    value: TIMEOUT_MS,
    help: "a whole request must arrive within this (HTTP/1.1 and HTTP/2); never cuts a response",
  },
  keepAliveTimeoutMs: {
    env: "LEASEQUEUE_KEEPALIVE_TIMEOUT_MS",
    flag: "keepalive-timeout-ms",
    default: String(SERVER_DEFAULTS.keepAliveTimeoutMs),
    value: TIMEOUT_MS,
    help: "idle HTTP/1.1 keep-alive connections are closed after this",
  },
  maxWatchers: {
    env: "LEASEQUEUE_MAX_WATCHERS",
    flag: "max-watchers",
    default: String(SERVER_DEFAULTS.maxWatchers),
    value: integer(1, 100_000, "a number"),
    help: "most WatchEvents streams at once; one more is resource_exhausted",
  },
  watchMaxPendingBytes: {
    env: "LEASEQUEUE_WATCH_MAX_PENDING_BYTES",
    flag: "watch-max-pending-bytes",
    default: String(SERVER_DEFAULTS.watchMaxPendingBytes),
    value: integer(65_536, 256 * 1024 * 1024, "a byte count", "bytes"),
    help: "unread bytes a WatchEvents client may leave in its connection before it is dropped",
    details: "See [WatchEvents limits](api.md#watchevents-limits)",
  },
  retention: {
    env: "LEASEQUEUE_RETENTION",
    flag: "retention",
    default: formatDurationText(DEFAULT_RETENTION.retentionMs),
    value: duration(MAX_RETENTION_MS, "100 years"),
    help: "completed and cancelled jobs are deleted, with their events, this long after they finished; 0s = keep forever",
    details: "Deleting a job frees its idempotency key. See [Retention](operations.md#retention)",
  },
  deadRetention: {
    env: "LEASEQUEUE_DEAD_RETENTION",
    flag: "dead-retention",
    default: "",
    unset: "dead jobs are kept until redriven",
    value: duration(MAX_RETENTION_MS, "100 years"),
    help: "dead jobs are deleted this long after they died (e.g. 720h); 0s = keep forever",
  },
  authFile: {
    env: "LEASEQUEUE_AUTH_FILE",
    flag: "auth-file",
    default: "",
    unset: "authentication off",
    value: text("a file path"),
    help: "JSON file of hashed bearer tokens with roles and queues; every RPC then needs a token (reread on SIGHUP)",
    details: "See [Authentication](../SECURITY.md#authentication)",
  },
} satisfies Record<string, Setting>;
