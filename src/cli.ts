/**
 * The `leasequeue` command: parse flags and environment into a Config, then
 * run `serve` (the default) or `migrate`; or `hash-token` (no Config).
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { startServer } from "./app.js";
import { HASH_TOKEN_USAGE, hashTokenCommand, UsageError } from "./commands/hash-token.js";
import { ConfigError, resolveConfig, settingFlags, SETTINGS } from "./config.js";
import { createLogger } from "./logger.js";
import { AuthFileError } from "./server/auth-file.js";
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
  ${HASH_TOKEN_USAGE}
  leasequeue --help | --version

Flags (each also an environment variable; a flag wins):
${rows.join("\n")}

Signals: SIGTERM or SIGINT stops accepting, lets in-flight calls finish (up to 10 s)
and closes the database cleanly. SIGHUP rereads LEASEQUEUE_AUTH_FILE (a bad file keeps
the tokens in force and logs why).
`;
}

/** Runs the command line; resolves to the process exit code (serve resolves when stopped). */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv[0] === "hash-token") return hashToken(argv.slice(1));
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
  if (positionals.length > 1 || !["serve", "migrate"].includes(command)) {
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

  log.info("starting", { version: version(), environment: config.environment, node: process.version });
  let server;
  try {
    server = await startServer(config, { log });
  } catch (err) {
    if (err instanceof AuthFileError) {
      process.stderr.write(`leasequeue: not starting: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const reload = () => {
    log.info("signal received", { signal: "SIGHUP" });
    server.reloadAuth();
  };
  process.on("SIGHUP", reload);
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
  process.off("SIGHUP", reload);
  return 0;
}

async function hashToken(args: string[]): Promise<number> {
  try {
    await hashTokenCommand(args, {
      readStdin: async () => {
        let input = "";
        for await (const chunk of process.stdin) input += String(chunk);
        return input;
      },
      write: (text) => process.stdout.write(text),
    });
    return 0;
  } catch (err) {
    // parseArgs throws TypeError (ERR_PARSE_ARGS_*) for unknown or malformed flags.
    if (err instanceof UsageError || (err instanceof TypeError && "code" in err)) {
      process.stderr.write(`leasequeue hash-token: ${err.message}\nUsage: ${HASH_TOKEN_USAGE}\n`);
      return 2;
    }
    throw err;
  }
}
