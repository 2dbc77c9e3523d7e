/**
 * Server configuration (api.md "Configuration"): every setting is an
 * environment variable and a flag of `leasequeue serve`; a flag wins over
 * the environment, which wins over the default.
 */
import { readFileSync } from "node:fs";
import { DEFAULTS } from "./domain/limits.js";

export interface Config {
  databasePath: string;
  host: string;
  port: number;
  metricsHost: string;
  metricsPort: number;
  environment: "development" | "production";
  maxRequestBytes: number;
  /** gRPC reflection: on in development, off in production unless LEASEQUEUE_REFLECTION=on. */
  reflection: boolean;
  /** SQLite synchronous mode; "full" fsyncs every commit. */
  sqliteSynchronous: "full" | "normal";
  tls?: { cert: string; key: string; certPath: string; keyPath: string };
  logLevel: "debug" | "info" | "warn" | "error";
}

interface Setting {
  env: string;
  flag: string;
  default: string;
  help: string;
}

/** The settings table, which is also the source of `--help`. */
export const SETTINGS = {
  databasePath: { env: "LEASEQUEUE_DATABASE_PATH", flag: "db", default: "leasequeue.db", help: "SQLite database file" },
  host: { env: "LEASEQUEUE_HOST", flag: "host", default: "127.0.0.1", help: "API listener address" },
  port: { env: "LEASEQUEUE_PORT", flag: "port", default: "8080", help: "API port (gRPC, gRPC-Web, Connect); 0 = any free port" },
  metricsHost: { env: "LEASEQUEUE_METRICS_HOST", flag: "metrics-host", default: "", help: "side listener address (default: same as host)" },
  metricsPort: { env: "LEASEQUEUE_METRICS_PORT", flag: "metrics-port", default: "9464", help: "side port (/metrics, /health/*); 0 = any free port" },
  environment: { env: "LEASEQUEUE_ENVIRONMENT", flag: "environment", default: "development", help: "development or production" },
  maxRequestBytes: { env: "LEASEQUEUE_MAX_REQUEST_BYTES", flag: "max-request-bytes", default: String(DEFAULTS.maxRequestBytes), help: "largest request body accepted" },
  reflection: { env: "LEASEQUEUE_REFLECTION", flag: "reflection", default: "", help: "gRPC reflection on|off (default: on unless production)" },
  sqliteSynchronous: { env: "LEASEQUEUE_SQLITE_SYNCHRONOUS", flag: "sqlite-synchronous", default: "full", help: "full (fsync every commit) or normal" },
  tlsCert: { env: "LEASEQUEUE_TLS_CERT", flag: "tls-cert", default: "", help: "PEM certificate file; enables TLS with --tls-key" },
  tlsKey: { env: "LEASEQUEUE_TLS_KEY", flag: "tls-key", default: "", help: "PEM private key file" },
  logLevel: { env: "LEASEQUEUE_LOG_LEVEL", flag: "log-level", default: "info", help: "debug, info, warn or error" },
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
  const reflectionRaw = get(S.reflection);
  const reflection =
    reflectionRaw.raw === "" ? environment !== "production" : oneOf(reflectionRaw.name, reflectionRaw.raw, ["on", "off"]) === "on";
  const maxBytes = get(S.maxRequestBytes);
  const maxRequestBytes = Number(maxBytes.raw);
  if (!/^\d+$/.test(maxBytes.raw) || maxRequestBytes < 1024 || maxRequestBytes > 64 * 1024 * 1024) {
    throw new ConfigError(`${maxBytes.name} must be a byte count from 1024 to 67108864, got "${maxBytes.raw}"`);
  }
  const databasePath = get(S.databasePath).raw;
  if (databasePath === "") throw new ConfigError(`${get(S.databasePath).name} must not be empty`);

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

  return {
    databasePath,
    host,
    port: port(get(S.port).name, get(S.port).raw),
    metricsHost: get(S.metricsHost).raw || host,
    metricsPort: port(get(S.metricsPort).name, get(S.metricsPort).raw),
    environment,
    maxRequestBytes,
    reflection,
    sqliteSynchronous: oneOf(get(S.sqliteSynchronous).name, get(S.sqliteSynchronous).raw, ["full", "normal"] as const),
    tls,
    logLevel: oneOf(get(S.logLevel).name, get(S.logLevel).raw, ["debug", "info", "warn", "error"] as const),
  };
}

/** Flag names for util.parseArgs. */
export function settingFlags(): Record<string, { type: "string" }> {
  return Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }]));
}
