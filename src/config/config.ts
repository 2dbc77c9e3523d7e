/**
 * Server configuration (docs/configuration.md): every setting is an
 * environment variable and a flag of `leasequeue serve`; a flag wins over
 * the environment, which wins over the default. The settings table
 * (config/settings.ts) holds each one's default and bounds; here they are
 * read into a Config, and the rules between settings are checked.
 */
import { readFileSync } from "node:fs";
import type { RetentionPolicy } from "../domain/retention.js";
import { SETTINGS, type Setting } from "./settings.js";
import { tracingConfig, type TracingConfig } from "./tracing.js";
import { ConfigError, type RequestCompression } from "./values.js";

export { SETTINGS, type Setting } from "./settings.js";
export { ConfigError, redactDatabaseUrl, type RequestCompression } from "./values.js";
export type { OtlpProtocol, TracingConfig } from "./tracing.js";

export interface Config {
  databasePath: string;
  /**
   * The PostgreSQL store (docs/postgresql.md), chosen by LEASEQUEUE_DATABASE_URL;
   * undefined: the SQLite file `databasePath`.
   */
  postgres?: PostgresConfig;
  host: string;
  port: number;
  metricsHost: string;
  metricsPort: number;
  environment: "development" | "production";
  maxRequestBytes: number;
  /** gRPC reflection: on in development, off in production unless LEASEQUEUE_REFLECTION=on. */
  reflection: boolean;
  /** The API reference at /docs: on in development, off in production unless LEASEQUEUE_DOCS=on. */
  docs: boolean;
  /** "full": every answer waits for an fsync of the WAL holding its commit; "normal": no fsync per commit. */
  sqliteSynchronous: "full" | "normal";
  tls?: { cert: string; key: string; certPath: string; keyPath: string };
  logLevel: "debug" | "info" | "warn" | "error";
  /** Request encodings the API port decompresses; brotli only on request, its window bounded. */
  requestCompression: RequestCompression[];
  /** Whether responses may be compressed (with an encoding of requestCompression the client accepts). */
  responseCompression: boolean;
  /** The server's hand-written wire paths ("fast"), or connect-es's and protobuf-es's own ("library"). */
  wire: "fast" | "library";
  /** Most concurrent streams one HTTP/2 connection may open (SETTINGS_MAX_CONCURRENT_STREAMS). */
  http2MaxConcurrentStreams: number;
  /** A request's headers must arrive within this (HTTP/1.1; HTTP/2 delivers headers whole). */
  requestHeadersTimeoutMs: number;
  /** A whole request (a unary or server-stream request's body included) must arrive within this, HTTP/1.1 and HTTP/2. */
  requestTimeoutMs: number;
  /** An idle HTTP/1.1 keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** Most WatchEvents streams at once; one more is refused with resource_exhausted. */
  maxWatchers: number;
  /** Bytes a WatchEvents client may leave unread in its connection before it is dropped as too slow. */
  watchMaxPendingBytes: number;
  /** How long finished jobs are kept (docs/operations.md "Retention"). */
  retention: RetentionPolicy;
  /** The auth file (bearer tokens, roles, queues); undefined: authentication is off. Read at start and on SIGHUP. */
  authFile?: string;
  /** Spans exported over OTLP (docs/operations.md "Tracing"), from the standard OTEL_ variables; undefined: off. */
  tracing?: TracingConfig;
}

/** Where and how the PostgreSQL store connects. */
export interface PostgresConfig {
  /** The postgres:// URL as given, password included: hand it to the driver, never to a log (see redactDatabaseUrl). */
  url: string;
  /** The schema holding LeaseQueue's tables and `<schema>.submit` (a plain lower-case identifier). */
  schema: string;
  /** Most connections of the store's pool (the LISTEN connection is one more). */
  poolSize: number;
  /** statement_timeout of the store's connections in ms; 0: none. */
  statementTimeoutMs: number;
}

/** A setting's text as given, and the name to quote in a message: the flag if given, else the variable. */
interface Given {
  raw: string;
  name: string;
}

/**
 * Builds the Config from parsed flag values (by flag name) and the
 * environment. Throws ConfigError naming the setting on a bad value.
 */
export function resolveConfig(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv): Config {
  const given = (s: Setting): Given => {
    const fromFlag = flags[s.flag];
    if (fromFlag !== undefined) return { raw: fromFlag, name: `--${s.flag}` };
    const fromEnv = env[s.env];
    if (fromEnv !== undefined && fromEnv !== "") return { raw: fromEnv, name: s.env };
    return { raw: s.default, name: s.env };
  };
  /** The setting's value, within its bounds. */
  const read = <T>(s: Setting<T>): T => {
    const { raw, name } = given(s);
    return s.value.parse(name, raw);
  };
  /** A setting without a default: undefined when unset (or given empty). */
  const readIfSet = <T>(s: Setting<T>): T | undefined => {
    const { raw, name } = given(s);
    return raw === "" ? undefined : s.value.parse(name, raw);
  };
  const S = SETTINGS;
  const host = read(S.host);
  const environment = read(S.environment);
  // Developer surfaces: on unless production, where a setting must turn them on.
  const onUnlessProduction = (s: typeof S.reflection): boolean => (readIfSet(s) ?? (environment !== "production" ? "on" : "off")) === "on";
  const reflection = onUnlessProduction(S.reflection);
  const docs = onUnlessProduction(S.docs);
  const maxRequestBytes = read(S.maxRequestBytes);
  const databasePath = read(S.databasePath);
  const postgres = postgresConfig(flags, given, read);
  const tls = tlsFiles(readIfSet(S.tlsCert), readIfSet(S.tlsKey));

  const requestHeadersTimeoutMs = read(S.requestHeadersTimeoutMs);
  const requestTimeoutMs = read(S.requestTimeoutMs);
  if (requestHeadersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `${given(S.requestHeadersTimeoutMs).name} (${requestHeadersTimeoutMs}) must not exceed ${given(S.requestTimeoutMs).name} (${requestTimeoutMs})`,
    );
  }

  const retention: RetentionPolicy = {
    retentionMs: read(S.retention),
    deadRetentionMs: readIfSet(S.deadRetention) ?? null,
  };

  return {
    databasePath,
    postgres,
    host,
    port: read(S.port),
    metricsHost: readIfSet(S.metricsHost) ?? host,
    metricsPort: read(S.metricsPort),
    environment,
    maxRequestBytes,
    reflection,
    docs,
    sqliteSynchronous: read(S.sqliteSynchronous),
    tls,
    logLevel: read(S.logLevel),
    requestCompression: read(S.requestCompression),
    responseCompression: read(S.responseCompression) === "on",
    wire: read(S.wire),
    http2MaxConcurrentStreams: read(S.http2MaxConcurrentStreams),
    requestHeadersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: read(S.keepAliveTimeoutMs),
    maxWatchers: read(S.maxWatchers),
    watchMaxPendingBytes: read(S.watchMaxPendingBytes),
    retention,
    authFile: readIfSet(S.authFile),
    tracing: tracingConfig(env),
  };
}

/** The certificate and key, read at start: both or neither. */
function tlsFiles(certPath: string | undefined, keyPath: string | undefined): Config["tls"] {
  const S = SETTINGS;
  if ((certPath === undefined) !== (keyPath === undefined)) {
    throw new ConfigError(`TLS needs both --${S.tlsCert.flag} and --${S.tlsKey.flag} (${S.tlsCert.env}, ${S.tlsKey.env})`);
  }
  if (certPath === undefined || keyPath === undefined) return undefined;
  const read = (path: string, what: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch (err) {
      throw new ConfigError(`cannot read TLS ${what} ${path}: ${(err as Error).message}`);
    }
  };
  return { cert: read(certPath, "certificate"), key: read(keyPath, "key"), certPath, keyPath };
}

/** The PostgreSQL settings, or undefined when LEASEQUEUE_DATABASE_URL is not set (SQLite). */
function postgresConfig(
  flags: Record<string, string | undefined>,
  given: (s: Setting) => Given,
  read: <T>(s: Setting<T>) => T,
): PostgresConfig | undefined {
  const S = SETTINGS;
  if (given(S.databaseUrl).raw === "") return undefined;
  // The URL wins over LEASEQUEUE_DATABASE_PATH (a container image may set
  // that one by default); two flags that contradict each other are refused.
  if (flags[S.databasePath.flag] !== undefined && flags[S.databaseUrl.flag] !== undefined) {
    throw new ConfigError(`--${S.databaseUrl.flag} selects PostgreSQL and --${S.databasePath.flag} a SQLite file: give one of them`);
  }
  const statementTimeoutMs = read(S.databaseStatementTimeoutMs);
  return {
    url: read(S.databaseUrl),
    schema: read(S.databaseSchema),
    poolSize: read(S.databasePoolSize),
    statementTimeoutMs,
  };
}

/** Flag names for util.parseArgs. */
export function settingFlags(): Record<string, { type: "string" }> {
  return Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }]));
}
