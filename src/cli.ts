/**
 * The `leasequeue` command: parse flags and environment into a Config, then
 * run `serve` (the default), `migrate` or `prune`.
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { startServer } from "./app.js";
import { ConfigError, resolveConfig, settingFlags, SETTINGS } from "./config.js";
import { createLogger } from "./logger.js";
import { formatPruneSummary, pruneNow } from "./prune-command.js";
import { migrate } from "./store/sqlite/sqlite-store.js";

function version(): string {
  for (const rel of ["../../package.json", "../package.json"]) {
    const url = new URL(rel, import.meta.url);
    if (existsSync(url)) {
      const pkg = JSON.parse(readFileSync(url, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "leasequeue") return pkg.version ?? "unknown";
    }
  }
  return "unknown";
}

function usage(): string {
  const settings = Object.values(SETTINGS);
  const flagWidth = Math.max(...settings.map((s) => s.flag.length));
  const envWidth = Math.max(...settings.map((s) => s.env.length));
  const rows = settings.map(
    (s) => `  --${s.flag.padEnd(flagWidth)} ${s.env.padEnd(envWidth)} ${s.help}${s.default ? ` (default ${s.default})` : ""}`,
  );
  return `leasequeue ${version()} - a durable background-job server (gRPC, gRPC-Web and Connect on one port)

Usage:
  leasequeue [serve] [flags]   run the server (the default command)
  leasequeue migrate [--db PATH]
                               apply database migrations and exit
  leasequeue prune [--db PATH] [--retention DURATION] [--dead-retention DURATION]
                               one retention pass now over the whole backlog (safe beside
                               a running server: small batches); prints what it deleted
  leasequeue --help | --version

Flags (each also an environment variable; a flag wins):
${rows.join("\n")}

Signals: SIGTERM or SIGINT stops accepting, lets in-flight calls finish (up to 10 s)
and closes the database cleanly.
`;
}

/** Runs the command line; resolves to the process exit code (serve resolves when stopped). */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { ...settingFlags(), help: { type: "boolean", short: "h" }, version: { type: "boolean", short: "v" } },
    });
  } catch (err) {
    process.stderr.write(`leasequeue: ${(err as Error).message}\nRun "leasequeue --help" for usage.\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage());
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const command = positionals[0] ?? "serve";
  if (positionals.length > 1 || !["serve", "migrate", "prune"].includes(command)) {
    process.stderr.write(`leasequeue: unknown command "${positionals.join(" ")}"\nRun "leasequeue --help" for usage.\n`);
    return 2;
  }

  let config;
  try {
    config = resolveConfig(values as Record<string, string | undefined>, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`leasequeue: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const log = createLogger({ level: config.logLevel, base: { service: "leasequeue" } });

  if (command === "migrate") {
    const db = new Database(config.databasePath, { timeout: 5000 });
    try {
      db.pragma("journal_mode = WAL");
      const applied = migrate(db);
      log.info("migrations applied", { path: config.databasePath, applied, version: db.pragma("user_version", { simple: true }) });
    } finally {
      db.close();
    }
    return 0;
  }

  if (command === "prune") {
    if (!existsSync(config.databasePath)) {
      process.stderr.write(`leasequeue: no database at ${config.databasePath} (set --db or LEASEQUEUE_DATABASE_PATH)\n`);
      return 1;
    }
    try {
      const summary = await pruneNow(config);
      process.stdout.write(formatPruneSummary(summary, config.retention));
    } catch (err) {
      process.stderr.write(`leasequeue: prune failed: ${(err as Error).message}\n`);
      return 1;
    }
    return 0;
  }

  log.info("starting", { version: version(), environment: config.environment, node: process.version });
  const server = await startServer(config, { log });
  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      log.info("signal received", { signal });
      process.once(signal, () => {
        log.warn("second signal: exiting at once", { signal });
        process.exit(130);
      });
      server.close().then(resolve, (err) => {
        log.error("shutdown failed", { error: err });
        resolve();
      });
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  return 0;
}
