/**
 * Server configuration (api.md "Configuration"): every setting is an
 * environment variable and a flag of `leasequeue serve`; a flag wins over
 * the environment, which wins over the default.
 */
import { readFileSync } from "node:fs";
import { formatDurationText, parseDurationText } from "./domain/duration-text.js";
import { DEFAULTS } from "./domain/limits.js";
import { DEFAULT_RETENTION, type RetentionPolicy } from "./domain/retention.js";

export interface Config {
  databasePath: string;
  /**
   * The PostgreSQL store (api.md section C), chosen by LEASEQUEUE_DATABASE_URL;
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
  /** How long finished jobs are kept (api.md section B "Retention"). */
  retention: RetentionPolicy;
  /** The auth file (bearer tokens, roles, queues); undefined: authentication is off. Read at start and on SIGHUP. */
  authFile?: string;
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

/** A request Content-Encoding / grpc-encoding the server may accept. */
export type RequestCompression = "gzip" | "br";

interface Setting {
  env: string;
  flag: string;
  default: string;
  help: string;
}

/** The settings table, which is also the source of `--help`. */
export const SETTINGS = {
  databasePath: { env: "LEASEQUEUE_DATABASE_PATH", flag: "db", default: "leasequeue.db", help: "SQLite database file" },
  databaseUrl: {
    env: "LEASEQUEUE_DATABASE_URL",
    flag: "database-url",
    default: "",
    help: "postgres:// URL: use PostgreSQL instead of the SQLite file (several servers may share it)",
  },
  databaseSchema: {
    env: "LEASEQUEUE_DATABASE_SCHEMA",
    flag: "database-schema",
    default: "leasequeue",
    help: "PostgreSQL schema of LeaseQueue's tables and submit() function (lower-case letters, digits, _)",
  },
  databasePoolSize: {
    env: "LEASEQUEUE_DATABASE_POOL_SIZE",
    flag: "database-pool-size",
    default: "10",
    help: "most PostgreSQL connections per server (1-1000), plus one that listens for other servers' commits",
  },
  databaseStatementTimeoutMs: {
    env: "LEASEQUEUE_DATABASE_STATEMENT_TIMEOUT_MS",
    flag: "database-statement-timeout-ms",
    default: "30000",
    help: "PostgreSQL statement_timeout of the server's connections (ms; 0 = none)",
  },
  host: { env: "LEASEQUEUE_HOST", flag: "host", default: "127.0.0.1", help: "API listener address" },
  port: { env: "LEASEQUEUE_PORT", flag: "port", default: "8080", help: "API port (gRPC, gRPC-Web, Connect); 0 = any free port" },
  metricsHost: { env: "LEASEQUEUE_METRICS_HOST", flag: "metrics-host", default: "", help: "side listener address (default: same as host)" },
  metricsPort: {
    env: "LEASEQUEUE_METRICS_PORT",
    flag: "metrics-port",
    default: "9464",
    help: "side port (/metrics, /health/*); 0 = any free port",
  },
  environment: { env: "LEASEQUEUE_ENVIRONMENT", flag: "environment", default: "development", help: "development or production" },
  maxRequestBytes: {
    env: "LEASEQUEUE_MAX_REQUEST_BYTES",
    flag: "max-request-bytes",
    default: String(DEFAULTS.maxRequestBytes),
    help: "largest request body accepted",
  },
  reflection: {
    env: "LEASEQUEUE_REFLECTION",
    flag: "reflection",
    default: "",
    help: "gRPC reflection on|off (default: on unless production)",
  },
  docs: {
    env: "LEASEQUEUE_DOCS",
    flag: "docs",
    default: "",
    help: "the API reference at /docs (read and try every RPC) on|off (default: on unless production)",
  },
  sqliteSynchronous: {
    env: "LEASEQUEUE_SQLITE_SYNCHRONOUS",
    flag: "sqlite-synchronous",
    default: "full",
    help: "full (answer after an fsync of each commit) or normal",
  },
  tlsCert: { env: "LEASEQUEUE_TLS_CERT", flag: "tls-cert", default: "", help: "PEM certificate file; enables TLS with --tls-key" },
  tlsKey: { env: "LEASEQUEUE_TLS_KEY", flag: "tls-key", default: "", help: "PEM private key file" },
  logLevel: { env: "LEASEQUEUE_LOG_LEVEL", flag: "log-level", default: "info", help: "debug, info, warn or error" },
  requestCompression: {
    env: "LEASEQUEUE_REQUEST_COMPRESSION",
    flag: "request-compression",
    default: "gzip",
    help: "request encodings accepted: gzip, br, gzip,br or none",
  },
  responseCompression: {
    env: "LEASEQUEUE_RESPONSE_COMPRESSION",
    flag: "response-compression",
    default: "off",
    help: "compress responses over 1 KiB for clients that accept it: on or off (off: CPU matters more than bytes on a LAN)",
  },
  http2MaxConcurrentStreams: {
    env: "LEASEQUEUE_HTTP2_MAX_CONCURRENT_STREAMS",
    flag: "http2-max-concurrent-streams",
    default: "256",
    help: "most concurrent streams per HTTP/2 connection (1-10000)",
  },
  requestHeadersTimeoutMs: {
    env: "LEASEQUEUE_REQUEST_HEADERS_TIMEOUT_MS",
    flag: "request-headers-timeout-ms",
    default: "30000",
    help: "a request's headers must arrive within this (ms)",
  },
  requestTimeoutMs: {
    env: "LEASEQUEUE_REQUEST_TIMEOUT_MS",
    flag: "request-timeout-ms",
    default: "60000",
    help: "a whole request must arrive within this (ms); never cuts a response",
  },
  keepAliveTimeoutMs: {
    env: "LEASEQUEUE_KEEPALIVE_TIMEOUT_MS",
    flag: "keepalive-timeout-ms",
    default: "65000",
    help: "idle HTTP/1.1 keep-alive connections are closed after this (ms)",
  },
  maxWatchers: {
    env: "LEASEQUEUE_MAX_WATCHERS",
    flag: "max-watchers",
    default: "1000",
    help: "most WatchEvents streams at once (1-100000)",
  },
  watchMaxPendingBytes: {
    env: "LEASEQUEUE_WATCH_MAX_PENDING_BYTES",
    flag: "watch-max-pending-bytes",
    default: "1048576",
    help: "unread bytes a WatchEvents client may leave in its connection before it is dropped (65536-268435456)",
  },
  retention: {
    env: "LEASEQUEUE_RETENTION",
    flag: "retention",
    default: formatDurationText(DEFAULT_RETENTION.retentionMs),
    help: "completed and cancelled jobs are deleted with their events this long after they finished (e.g. 168h, 30d; 0s = keep forever)",
  },
  deadRetention: {
    env: "LEASEQUEUE_DEAD_RETENTION",
    flag: "dead-retention",
    default: "",
    help: "dead jobs are deleted this long after they died (default: kept until redriven; 0s = keep forever)",
  },
  authFile: {
    env: "LEASEQUEUE_AUTH_FILE",
    flag: "auth-file",
    default: "",
    help: "JSON file of hashed bearer tokens with roles and queues; every RPC then needs a token (off unless set; reread on SIGHUP)",
  },
} satisfies Record<string, Setting>;

export class ConfigError extends Error {
  override name = "ConfigError";
}

function port(name: string, raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n > 65535) throw new ConfigError(`${name} must be a port number 0-65535, got "${raw}"`);
  return n;
}

function oneOf<T extends string>(name: string, raw: string, values: readonly T[]): T {
  if (!(values as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${values.join(", ")}, got "${raw}"`);
  }
  return raw as T;
}

function integer(name: string, raw: string, min: number, max: number, what: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) throw new ConfigError(`${name} must be ${what} from ${min} to ${max}, got "${raw}"`);
  return n;
}

/**
 * The URL with its password (in the user part or a `password` parameter)
 * replaced by `***`, for logs and messages. Text that is not a URL comes
 * back as a placeholder, since it may hold a password anywhere.
 */
export function redactDatabaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "(not a URL)";
  }
  if (url.password !== "") url.password = "***";
  for (const key of [...url.searchParams.keys()]) {
    if (key.toLowerCase() === "password") url.searchParams.set(key, "***");
  }
  return url.toString();
}

/** The PostgreSQL URL forms the driver reads (pg-connection-string). */
const POSTGRES_PROTOCOLS = ["postgres:", "postgresql:"];

function databaseUrl(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Never echo it: a malformed URL may still hold a password.
    throw new ConfigError(`${name} is not a URL; write postgres://user:password@host:5432/database`);
  }
  if (!POSTGRES_PROTOCOLS.includes(url.protocol)) {
    throw new ConfigError(`${name} must be a postgres:// (or postgresql://) URL, got "${redactDatabaseUrl(raw)}"`);
  }
  if (url.hostname === "" && url.searchParams.get("host") === null) {
    throw new ConfigError(`${name} names no host: write postgres://user:password@host:5432/database, got "${redactDatabaseUrl(raw)}"`);
  }
  if (url.port !== "" && Number(url.port) === 0) throw new ConfigError(`${name} has port 0, got "${redactDatabaseUrl(raw)}"`);
  return raw;
}

/**
 * A PostgreSQL schema name LeaseQueue accepts: an identifier that needs no
 * quoting and means the same in every client (lower case, so unquoted SQL
 * such as `SELECT leasequeue.submit(...)` names it), not in PostgreSQL's
 * reserved `pg_` prefix, and short enough to be a notification channel.
 */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function databaseSchema(name: string, raw: string): string {
  if (!SCHEMA_NAME.test(raw) || raw.startsWith("pg_")) {
    throw new ConfigError(
      `${name} must be 1-63 lower-case letters, digits or _, starting with a letter or _ and not with pg_, got "${raw}"`,
    );
  }
  return raw;
}

/** Longest retention accepted: 100 years, far beyond any use and far from overflowing a timestamp. */
const MAX_RETENTION_MS = 100 * 365 * 86_400_000;

function retentionDuration(name: string, raw: string): number {
  let ms: number;
  try {
    ms = parseDurationText(raw);
  } catch (err) {
    throw new ConfigError(`${name} ${(err as Error).message}`);
  }
  if (ms > MAX_RETENTION_MS) throw new ConfigError(`${name} must be at most 100 years (876000h), got "${raw}"`);
  return ms;
}

function requestCompression(name: string, raw: string): RequestCompression[] {
  if (raw === "none") return [];
  const names = raw.split(",").map((part) => part.trim());
  const known: readonly string[] = ["gzip", "br"];
  if (names.length === 0 || names.some((n) => !known.includes(n)) || new Set(names).size !== names.length) {
    throw new ConfigError(`${name} must be gzip, br, gzip,br or none, got "${raw}"`);
  }
  return names as RequestCompression[];
}

/**
 * Builds the Config from parsed flag values (by flag name) and the
 * environment. Throws ConfigError naming the setting on a bad value.
 */
export function resolveConfig(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv): Config {
  const get = (s: Setting): { raw: string; name: string } => {
    const fromFlag = flags[s.flag];
    if (fromFlag !== undefined) return { raw: fromFlag, name: `--${s.flag}` };
    const fromEnv = env[s.env];
    if (fromEnv !== undefined && fromEnv !== "") return { raw: fromEnv, name: s.env };
    return { raw: s.default, name: s.env };
  };
  const S = SETTINGS;
  const host = get(S.host).raw;
  const environment = oneOf(get(S.environment).name, get(S.environment).raw, ["development", "production"] as const);
  // Developer surfaces: on unless production, where a setting must turn them on.
  const onUnlessProduction = (s: Setting): boolean => {
    const { raw, name } = get(s);
    return raw === "" ? environment !== "production" : oneOf(name, raw, ["on", "off"]) === "on";
  };
  const reflection = onUnlessProduction(S.reflection);
  const docs = onUnlessProduction(S.docs);
  const maxBytes = get(S.maxRequestBytes);
  const maxRequestBytes = Number(maxBytes.raw);
  if (!/^\d+$/.test(maxBytes.raw) || maxRequestBytes < 1024 || maxRequestBytes > 64 * 1024 * 1024) {
    throw new ConfigError(`${maxBytes.name} must be a byte count from 1024 to 67108864, got "${maxBytes.raw}"`);
  }
  const databasePath = get(S.databasePath).raw;
  if (databasePath === "") throw new ConfigError(`${get(S.databasePath).name} must not be empty`);
  const postgres = postgresConfig(flags, get);

  const certPath = get(S.tlsCert).raw;
  const keyPath = get(S.tlsKey).raw;
  let tls: Config["tls"];
  if ((certPath === "") !== (keyPath === "")) {
    throw new ConfigError("TLS needs both --tls-cert and --tls-key (LEASEQUEUE_TLS_CERT, LEASEQUEUE_TLS_KEY)");
  }
  if (certPath !== "") {
    const read = (path: string, what: string) => {
      try {
        return readFileSync(path, "utf8");
      } catch (err) {
        throw new ConfigError(`cannot read TLS ${what} ${path}: ${(err as Error).message}`);
      }
    };
    tls = { cert: read(certPath, "certificate"), key: read(keyPath, "key"), certPath, keyPath };
  }

  const timeout = (s: Setting, min: number) => integer(get(s).name, get(s).raw, min, 3_600_000, "milliseconds");
  const requestHeadersTimeoutMs = timeout(S.requestHeadersTimeoutMs, 100);
  const requestTimeoutMs = timeout(S.requestTimeoutMs, 100);
  if (requestHeadersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `${get(S.requestHeadersTimeoutMs).name} (${requestHeadersTimeoutMs}) must not exceed ${get(S.requestTimeoutMs).name} (${requestTimeoutMs})`,
    );
  }

  const deadRetention = get(S.deadRetention);
  const retention: RetentionPolicy = {
    retentionMs: retentionDuration(get(S.retention).name, get(S.retention).raw),
    deadRetentionMs: deadRetention.raw === "" ? null : retentionDuration(deadRetention.name, deadRetention.raw),
  };

  return {
    databasePath,
    postgres,
    host,
    port: port(get(S.port).name, get(S.port).raw),
    metricsHost: get(S.metricsHost).raw || host,
    metricsPort: port(get(S.metricsPort).name, get(S.metricsPort).raw),
    environment,
    maxRequestBytes,
    reflection,
    docs,
    sqliteSynchronous: oneOf(get(S.sqliteSynchronous).name, get(S.sqliteSynchronous).raw, ["full", "normal"] as const),
    tls,
    logLevel: oneOf(get(S.logLevel).name, get(S.logLevel).raw, ["debug", "info", "warn", "error"] as const),
    requestCompression: requestCompression(get(S.requestCompression).name, get(S.requestCompression).raw),
    responseCompression: oneOf(get(S.responseCompression).name, get(S.responseCompression).raw, ["on", "off"]) === "on",
    http2MaxConcurrentStreams: integer(
      get(S.http2MaxConcurrentStreams).name,
      get(S.http2MaxConcurrentStreams).raw,
      1,
      10_000,
      "a stream count",
    ),
    requestHeadersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: timeout(S.keepAliveTimeoutMs, 100),
    maxWatchers: integer(get(S.maxWatchers).name, get(S.maxWatchers).raw, 1, 100_000, "a number"),
    watchMaxPendingBytes: integer(
      get(S.watchMaxPendingBytes).name,
      get(S.watchMaxPendingBytes).raw,
      65_536,
      256 * 1024 * 1024,
      "a byte count",
    ),
    retention,
    authFile: get(S.authFile).raw === "" ? undefined : get(S.authFile).raw,
  };
}

/** The PostgreSQL settings, or undefined when LEASEQUEUE_DATABASE_URL is not set (SQLite). */
function postgresConfig(
  flags: Record<string, string | undefined>,
  get: (s: Setting) => { raw: string; name: string },
): PostgresConfig | undefined {
  const S = SETTINGS;
  const url = get(S.databaseUrl);
  if (url.raw === "") return undefined;
  // The URL wins over LEASEQUEUE_DATABASE_PATH (a container image may set
  // that one by default); two flags that contradict each other are refused.
  if (flags[S.databasePath.flag] !== undefined && flags[S.databaseUrl.flag] !== undefined) {
    throw new ConfigError(`--${S.databaseUrl.flag} selects PostgreSQL and --${S.databasePath.flag} a SQLite file: give one of them`);
  }
  const timeout = get(S.databaseStatementTimeoutMs);
  const statementTimeoutMs = integer(timeout.name, timeout.raw, 0, 3_600_000, "milliseconds");
  if (statementTimeoutMs > 0 && statementTimeoutMs < 100) {
    throw new ConfigError(`${timeout.name} must be 0 (none) or from 100 to 3600000 milliseconds, got "${timeout.raw}"`);
  }
  return {
    url: databaseUrl(url.name, url.raw),
    schema: databaseSchema(get(S.databaseSchema).name, get(S.databaseSchema).raw),
    poolSize: integer(get(S.databasePoolSize).name, get(S.databasePoolSize).raw, 1, 1000, "a connection count"),
    statementTimeoutMs,
  };
}

/** Flag names for util.parseArgs. */
export function settingFlags(): Record<string, { type: "string" }> {
  return Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }]));
}
