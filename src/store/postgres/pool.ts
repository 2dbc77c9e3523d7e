/**
 * The connections of the PostgreSQL store: a pool for transactions and
 * reads, and the settings every connection of it gets (the schema's
 * statement timeout, bigint as numbers). Each pool has its own type
 * parsers, so nothing global in node-postgres is changed for an
 * application that embeds LeaseQueue beside its own pg code.
 */
import pg from "pg";

/** The int8 type: every bigint of the schema is epoch ms or a count, far below 2^53. */
const INT8_OID = 20;

const parseInt8 = (text: string) => Number(text);

/** node-postgres' parsers, except int8 as a number. */
const defaultParser = pg.types.getTypeParser as (oid: number, format?: "text" | "binary") => (value: string) => unknown;

export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary" ? parseInt8 : defaultParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
};

export interface PgConnectionOptions {
  url: string;
  /** Most connections of the pool. */
  poolSize: number;
  /** statement_timeout of each connection in ms; 0: none. */
  statementTimeoutMs: number;
  /** Shown in pg_stat_activity. */
  applicationName?: string;
  /** How long to wait for a new connection before a call fails. Default 5000 ms. */
  connectionTimeoutMs?: number;
}

/** The client settings of the store's connections (the LISTEN connection uses them too). */
export function clientConfig(options: PgConnectionOptions): pg.ClientConfig {
  return {
    connectionString: options.url,
    types: PG_TYPES,
    application_name: options.applicationName ?? "leasequeue",
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
    keepAlive: true,
    // Statements issued while others are in flight go out at once, not one
    // round trip after another (the end of a transaction is one round trip).
    pipeline: true,
    ...(options.statementTimeoutMs > 0 ? { statement_timeout: options.statementTimeoutMs } : {}),
  };
}

export function createPool(options: PgConnectionOptions): pg.Pool {
  const pool = new pg.Pool({ ...clientConfig(options), max: options.poolSize, idleTimeoutMillis: 30_000 });
  // An idle connection that dies (the server restarted, pg_terminate_backend)
  // emits an error on the pool; without a listener it would end the process.
  pool.on("error", () => {});
  return pool;
}
