/**
 * The `leasequeue` command: parse flags and environment into a Config, then
 * run `serve` (the default), `migrate`, one of the maintenance commands
 * (backup, check, restore, import-litequeue, prune; each in src/commands/),
 * or `hash-token` (needs no Config).
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { databaseLocation, startServer, type RunningServer } from "./app.js";
import { backupCommand } from "./commands/backup.js";
import { checkCommand } from "./commands/check.js";
import type { Command } from "./commands/command.js";
import { importLitequeueCommand } from "./commands/import-litequeue.js";
import { pruneCommand } from "./commands/prune.js";
import { restoreCommand } from "./commands/restore.js";
import { ConfigError, redactDatabaseUrl, resolveConfig, settingFlags, type Config } from "./config/config.js";
import { settingsHelpRows } from "./config/settings-text.js";
import { HASH_TOKEN_USAGE, hashTokenCommand, UsageError } from "./commands/hash-token.js";
import { createLogger, type Logger } from "./logger.js";
import { AuthFileError } from "./server/auth-file.js";
import { DatabaseRefusal } from "./store/database/database-refusal.js";
import { describeLocation, migrateDatabase } from "./store/engine.js";

type OptionSpec = { type: "string" } | { type: "boolean" };

/** Each command: its positional arguments and its own options (beside the settings, which every command accepts). */
const COMMANDS: Record<string, { args: string[]; options: Record<string, OptionSpec>; run?: Command }> = {
  serve: { args: [], options: {} },
  migrate: { args: [], options: {} },
  prune: { args: [], options: {} },
  backup: { args: ["FILE"], options: { force: { type: "boolean" } }, run: backupCommand },
  check: { args: [], options: { quick: { type: "boolean" } }, run: checkCommand },
  restore: { args: ["BACKUP"], options: {}, run: restoreCommand },
  "import-litequeue": {
    args: ["FILE"],
    options: { queue: { type: "string" }, task: { type: "string" }, "dry-run": { type: "boolean" } },
    run: importLitequeueCommand,
  },
};

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
  return `leasequeue ${version()} - a durable background-job server (gRPC, gRPC-Web and Connect on one port)

Usage:
  leasequeue [serve] [flags]   run the server (the default command)
  leasequeue migrate [--db PATH]
                               apply database migrations and exit
  leasequeue backup FILE [--force] [--db PATH]
                               write a consistent copy of the database to FILE, also while a
                               server runs; refuses an existing FILE unless --force
  leasequeue check [--quick] [--db PATH]
                               check integrity, schema version and job counts (also while a
                               server runs); exit 1 and one line per problem when wrong
  leasequeue restore BACKUP [--db PATH]
                               with the server stopped: verify BACKUP, then replace the database
                               with it (the replaced one is kept as PATH.replaced-TIME)
  leasequeue import-litequeue FILE --queue NAME [--task NAME] [--dry-run] [--db PATH]
                               import a litequeue database's messages as jobs of queue NAME
                               (task "litequeue" unless --task), server stopped; --dry-run
                               only counts
  leasequeue prune [--db PATH] [--retention DURATION] [--dead-retention DURATION]
                               one retention pass now over the whole backlog, in small batches
                               (also while a server runs); prints what it deleted
  ${HASH_TOKEN_USAGE}
  leasequeue --help | --version

Flags (each also an environment variable; a flag wins):
${settingsHelpRows().join("\n")}

Signals: SIGTERM or SIGINT stops accepting, lets in-flight calls finish (up to 10 s)
and closes the database cleanly. SIGHUP rereads LEASEQUEUE_AUTH_FILE (a bad file keeps
the tokens in force and logs why).

Exit codes: 0 success; 1 refused or failed (a check that found problems, a database in
use, a bad backup or litequeue file); 2 a usage error (also a bad auth file at start).
`;
}

/** Runs the command line; resolves to the process exit code (serve resolves when stopped). */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv[0] === "hash-token") return hashToken(argv.slice(1));
  const line = parseCommandLine(argv);
  if (typeof line === "number") return line;
  let config;
  try {
    config = resolveConfig(line.settings, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`leasequeue: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (line.spec.run !== undefined && config.postgres !== undefined) {
    process.stderr.write(`leasequeue ${line.command}: ${sqliteOnly(line.command, config.postgres.schema)}\n`);
    return 1;
  }
  if (line.spec.run !== undefined) return runCommand(line.command, line.spec.run, config.databasePath, line.args, line.options);
  if (line.command === "prune") {
    return pruneCommand(config, {
      print: (text) => process.stdout.write(`${text}\n`),
      complain: (text) => process.stderr.write(`${text}\n`),
    });
  }
  const log = createLogger({ level: config.logLevel, base: { service: "leasequeue" } });
  return line.command === "migrate" ? migrateCommand(config, log) : serveCommand(config, log);
}

interface CommandLine {
  command: string;
  spec: (typeof COMMANDS)[string];
  args: string[];
  /** The command's own options that were given. */
  options: Record<string, string | boolean | undefined>;
  /** Setting flags by name, for resolveConfig. */
  settings: Record<string, string | undefined>;
}

/** The command, its arguments and options; or the exit code when that is all (--help, --version, a usage error). */
function parseCommandLine(argv: string[]): CommandLine | number {
  const usageError = (message: string) => {
    process.stderr.write(`leasequeue: ${message}\nRun "leasequeue --help" for usage.\n`);
    return 2;
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        ...settingFlags(),
        ...(Object.assign({}, ...Object.values(COMMANDS).map((c) => c.options)) as Record<string, OptionSpec>),
        help: { type: "boolean", short: "h" },
        version: { type: "boolean", short: "v" },
      },
    });
  } catch (err) {
    return usageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) {
    process.stdout.write(usage());
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const [command = "serve", ...args] = parsed.positionals;
  const spec = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (spec === undefined) return usageError(`unknown command "${parsed.positionals.join(" ")}"`);
  if (args.length !== spec.args.length) {
    const wanted = spec.args.length === 0 ? "no arguments" : spec.args.join(" ");
    return usageError(`${command} takes ${wanted}, got ${args.length === 0 ? "none" : `"${args.join(" ")}"`}`);
  }
  const options: CommandLine["options"] = {};
  for (const name of Object.values(COMMANDS).flatMap((c) => Object.keys(c.options))) {
    if (values[name] === undefined) continue;
    if (!(name in spec.options)) return usageError(`--${name} is not an option of ${command}`);
    options[name] = values[name];
  }
  return { command, spec, args, options, settings: values as Record<string, string | undefined> };
}

async function migrateCommand(config: Config, log: Logger): Promise<number> {
  const location = databaseLocation(config);
  try {
    const { applied, version } = await migrateDatabase(location);
    log.info("migrations applied", { ...describeLocation(location, redactDatabaseUrl), applied, version });
    return 0;
  } catch (err) {
    const message = databaseFailure(err, config);
    if (message === undefined) throw err;
    process.stderr.write(`leasequeue: ${message}\n`);
    return 1;
  }
}

/** Why a file command does not run on PostgreSQL, and what does its work there. */
function sqliteOnly(command: string, schema: string): string {
  const instead: Record<string, string> = {
    backup: `back PostgreSQL up with its own tools, e.g. pg_dump --schema=${schema} (or a base backup with WAL archiving)`,
    restore: "restore with PostgreSQL's own tools (pg_restore, or a point-in-time recovery), then start the servers",
    check: "PostgreSQL keeps its own consistency (amcheck checks indexes); `leasequeue migrate` checks the schema version",
    "import-litequeue": "import into a SQLite file first, or submit the messages with the SQL function submit()",
  };
  return `works on the SQLite store only, and LEASEQUEUE_DATABASE_URL selects PostgreSQL: ${instead[command] ?? "use PostgreSQL's own tools"}`;
}

/**
 * What to say when the database refused or could not be reached; undefined
 * for anything else (a bug, shown with its stack). PostgreSQL's errors name
 * the server, never the password.
 */
function databaseFailure(err: unknown, config: Config): string | undefined {
  if (err instanceof DatabaseRefusal) return err.message;
  if (config.postgres === undefined || !(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  return `cannot use the PostgreSQL database at ${redactDatabaseUrl(config.postgres.url)}: ${typeof code === "string" ? `${code}: ` : ""}${err.message}`;
}

async function serveCommand(config: Config, log: Logger): Promise<number> {
  log.info("starting", { version: version(), environment: config.environment, node: process.version });
  let server: RunningServer;
  try {
    server = await startServer(config, { log });
  } catch (err) {
    if (err instanceof AuthFileError) {
      process.stderr.write(`leasequeue: not starting: ${err.message}\n`);
      return 2;
    }
    const message = databaseFailure(err, config);
    if (message === undefined) throw err;
    log.error("cannot open the database", {
      ...describeLocation(databaseLocation(config), redactDatabaseUrl),
      ...(err instanceof DatabaseRefusal ? { reason: err.reason } : {}),
      error: message,
    });
    process.stderr.write(`leasequeue: ${message}\n`);
    return 1;
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
  exitOnceStopped();
  return 0;
}

/**
 * The server is stopped and its database closed: the process ends now even
 * if a span exporter still waits for a collector that never answers (its
 * requests and retry timers would hold the event loop for up to its own
 * timeout). The short delay lets the last log lines reach a pipe.
 */
function exitOnceStopped(): void {
  setTimeout(() => process.exit(), 100).unref();
}

/** Runs a maintenance command; a refusal is its message on stderr and exit code 1. */
function runCommand(
  name: string,
  run: Command,
  databasePath: string,
  args: string[],
  options: Record<string, string | boolean | undefined>,
): number {
  try {
    return run({
      databasePath,
      args,
      options,
      print: (line) => process.stdout.write(`${line}\n`),
      complain: (line) => process.stderr.write(`${line}\n`),
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (err instanceof DatabaseRefusal) process.stderr.write(`leasequeue ${name}: ${err.message}\n`);
    // SQLite's errors (a full disk, I/O) and the system's (EACCES) say enough without a stack.
    else if (err instanceof Error && typeof code === "string") process.stderr.write(`leasequeue ${name}: ${code}: ${err.message}\n`);
    else throw err;
    return 1;
  }
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
