/**
 * The kinds of value a setting takes. Each kind holds its bounds once: its
 * parser checks them and names the setting in the ConfigError, and
 * `accepts` says them in words for `--help` and docs/configuration.md.
 */
import { formatDurationText, parseDurationText } from "../domain/duration-text.js";

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A kind of setting value: how raw text becomes `T`, and what it accepts in words. */
export interface ValueKind<T> {
  /** What the setting accepts, for `--help` and docs/configuration.md; undefined: any text. */
  readonly accepts?: string;
  /** The value of `raw`; throws ConfigError naming the setting (`name`: its flag or variable) when `raw` is out of bounds. */
  parse(name: string, raw: string): T;
}

/** Any text; `accepts` says what it is for (e.g. "a file path"). */
export function text(accepts?: string): ValueKind<string> {
  return { accepts, parse: (_name, raw) => raw };
}

/** Text that must not be empty (`accepts` says what it is). */
export function nonEmptyText(accepts: string): ValueKind<string> {
  return {
    accepts,
    parse(name, raw) {
      if (raw === "") throw new ConfigError(`${name} must not be empty`);
      return raw;
    },
  };
}

/** A TCP port; 0 asks the system for any free one. */
export function port(): ValueKind<number> {
  return {
    accepts: "0-65535",
    parse(name, raw) {
      const n = Number(raw);
      if (!/^\d+$/.test(raw) || n > 65535) throw new ConfigError(`${name} must be a port number 0-65535, got "${raw}"`);
      return n;
    },
  };
}

/**
 * A whole number from `min` to `max`. `what` names the quantity in messages
 * ("a byte count", "milliseconds"); `unit`, when it has one, follows the
 * bounds in words ("100-3600000 ms").
 */
export function integer(min: number, max: number, what: string, unit?: string): ValueKind<number> {
  return {
    accepts: `${min}-${max}${unit === undefined ? "" : ` ${unit}`}`,
    parse(name, raw) {
      const n = Number(raw);
      if (!/^\d+$/.test(raw) || n < min || n > max) throw new ConfigError(`${name} must be ${what} from ${min} to ${max}, got "${raw}"`);
      return n;
    },
  };
}

/** 0 (off), or milliseconds from `min` to `max`. */
export function zeroOrMilliseconds(min: number, max: number): ValueKind<number> {
  const whole = integer(0, max, "milliseconds");
  return {
    accepts: `0 (none) or ${min}-${max} ms`,
    parse(name, raw) {
      const ms = whole.parse(name, raw);
      if (ms > 0 && ms < min) throw new ConfigError(`${name} must be 0 (none) or from ${min} to ${max} milliseconds, got "${raw}"`);
      return ms;
    },
  };
}

/** One of `values`. */
export function choice<const T extends string>(values: readonly T[]): ValueKind<T> {
  return {
    accepts: values.length === 2 ? `${values[0]} or ${values[1]}` : `${values.slice(0, -1).join(", ")} or ${values.at(-1)}`,
    parse(name, raw) {
      if (!(values as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${values.join(", ")}, got "${raw}"`);
      return raw as T;
    },
  };
}

/** A duration text (domain/duration-text.ts) of at most `maxMs`. */
export function duration(maxMs: number, maxWords: string): ValueKind<number> {
  const max = formatDurationText(maxMs);
  return {
    accepts: `a duration like 168h, 30d, 90m, 1h30m (units ms, s, m, h, d), at most ${maxWords} (${max})`,
    parse(name, raw) {
      let ms: number;
      try {
        ms = parseDurationText(raw);
      } catch (err) {
        throw new ConfigError(`${name} ${(err as Error).message}`);
      }
      if (ms > maxMs) throw new ConfigError(`${name} must be at most ${maxWords} (${max}), got "${raw}"`);
      return ms;
    },
  };
}

/** A request Content-Encoding / grpc-encoding the server may accept. */
export type RequestCompression = "gzip" | "br";

/** A list of request encodings, or none. */
export function requestCompressions(): ValueKind<RequestCompression[]> {
  const accepts = "gzip, br, gzip,br or none";
  return {
    accepts,
    parse(name, raw) {
      if (raw === "none") return [];
      const names = raw.split(",").map((part) => part.trim());
      const known: readonly string[] = ["gzip", "br"];
      if (names.length === 0 || names.some((n) => !known.includes(n)) || new Set(names).size !== names.length) {
        throw new ConfigError(`${name} must be ${accepts}, got "${raw}"`);
      }
      return names as RequestCompression[];
    },
  };
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

/** A postgres:// URL naming a host. Its text is never echoed whole: it may hold a password (see redactDatabaseUrl). */
export function postgresUrl(): ValueKind<string> {
  return {
    accepts: "a postgres:// or postgresql:// URL such as postgres://user:password@host:5432/database",
    parse(name, raw) {
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
    },
  };
}

/**
 * A PostgreSQL schema name LeaseQueue accepts: an identifier that needs no
 * quoting and means the same in every client (lower case, so unquoted SQL
 * such as `SELECT leasequeue.submit(...)` names it), not in PostgreSQL's
 * reserved `pg_` prefix, and short enough to be a notification channel.
 */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function schemaName(): ValueKind<string> {
  const accepts = "1-63 lower-case letters, digits or _, starting with a letter or _ and not with pg_";
  return {
    accepts,
    parse(name, raw) {
      if (!SCHEMA_NAME.test(raw) || raw.startsWith("pg_")) throw new ConfigError(`${name} must be ${accepts}, got "${raw}"`);
      return raw;
    },
  };
}
