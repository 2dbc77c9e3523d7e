/**
 * Runs the real `leasequeue` command (bin/leasequeue.js over dist/) as a child
 * process, for end-to-end tests: crash recovery, signals, the CLI surface.
 *
 * `npm test` builds dist/ first (the pretest script); when running vitest
 * directly, run `npm run build` first or these helpers fail with a message
 * saying so.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach } from "vitest";

/** The package root: the directory holding package.json. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const CLI_PATH = join(PACKAGE_ROOT, "bin", "leasequeue.js");
const COMPILED_CLI = join(PACKAGE_ROOT, "dist", "src", "cli.js");

/** How long spawnServer waits for both "listening" lines before giving up. */
const START_TIMEOUT_MS = 15_000;

export function assertBuilt(): void {
  if (!existsSync(COMPILED_CLI)) {
    throw new Error(
      `${COMPILED_CLI} is missing: the end-to-end tests run the compiled server. ` +
        `Run "npm run build" first (npm test does it through the pretest script).`,
    );
  }
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnedServer {
  child: ChildProcess;
  apiUrl: string;
  metricsUrl: string;
  /** Every stdout line so far (and later ones as they arrive). */
  lines: string[];
  /** Every stderr line so far. */
  stderrLines: string[];
  /**
   * Resolves with the first stdout line (already seen or still to come) for
   * which `pred` is true; `json` is the parsed line, or undefined if it is not
   * JSON. Rejects if the process exits first.
   */
  waitForLine(pred: (line: string, json: any) => boolean): Promise<string>;
  /** Settles when the process has exited and its output is fully read. */
  exited: Promise<ExitStatus>;
  /** Sends the signal (default SIGTERM) and resolves with the exit status. */
  stop(signal?: NodeJS.Signals): Promise<ExitStatus>;
}

/** Children still running, killed when the test process exits. */
const live = new Set<ChildProcess>();
/** Those of them that lead a process group of their own (npx and the server it starts). */
const groups = new WeakSet<ChildProcess>();
process.once("exit", () => {
  for (const child of live) {
    if (groups.has(child)) process.kill(-child.pid!, "SIGKILL");
    else child.kill("SIGKILL");
  }
});

function parseJson(line: string): any {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * Spawns `node bin/leasequeue.js --db dbPath --port 0 --metrics-port 0 ...extraArgs`
 * in the package root and resolves once both listener lines are logged.
 */
export function spawnServer(dbPath: string, extraArgs: string[] = [], options: { env?: NodeJS.ProcessEnv } = {}): Promise<SpawnedServer> {
  return spawnLeasequeue(["--db", dbPath, "--port", "0", "--metrics-port", "0", ...extraArgs], options);
}

/**
 * Spawns `node bin/leasequeue.js serve --database-url url --database-schema schema
 * --port 0 --metrics-port 0 ...extraArgs`: a server on a PostgreSQL schema, which
 * any number of such servers may share (test/helpers/postgres.ts gives the URL
 * and fresh schema names).
 */
export function spawnPostgresServer(
  url: string,
  schema: string,
  extraArgs: string[] = [],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<SpawnedServer> {
  const args = ["serve", "--database-url", url, "--database-schema", schema, "--port", "0", "--metrics-port", "0", ...extraArgs];
  return spawnLeasequeue(args, options);
}

/**
 * Spawns `npx --no-install leasequeue serve --db dbPath --port 0 --metrics-port 0`
 * in `dir`, where the package is installed (npm install of its tarball), as a
 * user would start it; resolves once both listener lines are logged.
 */
export function spawnInstalledServer(dir: string, dbPath: string): Promise<SpawnedServer> {
  const args = ["--no-install", "leasequeue", "serve", "--db", dbPath, "--port", "0", "--metrics-port", "0"];
  return spawnLeasequeue(args, { command: { file: "npx", cwd: dir } });
}

/** Spawns `node bin/leasequeue.js ...args` in the package root (or `command`) and resolves once both listener lines are logged. */
function spawnLeasequeue(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; command?: { file: string; cwd: string } },
): Promise<SpawnedServer> {
  if (options.command === undefined) assertBuilt();
  const { file, cwd } = options.command ?? { file: process.execPath, cwd: PACKAGE_ROOT };
  const child = spawn(file, options.command === undefined ? [CLI_PATH, ...args] : args, {
    cwd,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
    // npx runs the server as a child of its own: signal the whole group.
    detached: options.command !== undefined,
  });
  live.add(child);
  if (options.command !== undefined) groups.add(child);

  const lines: string[] = [];
  const stderrLines: string[] = [];
  const watchers = new Set<{ pred: (line: string, json: any) => boolean; resolve: (line: string) => void }>();
  const stdout = createInterface({ input: child.stdout });
  const stderr = createInterface({ input: child.stderr });
  stdout.on("line", (line) => {
    lines.push(line);
    const json = parseJson(line);
    for (const w of [...watchers]) {
      if (w.pred(line, json)) {
        watchers.delete(w);
        w.resolve(line);
      }
    }
  });
  stderr.on("line", (line) => stderrLines.push(line));

  const stdoutClosed = new Promise<void>((r) => stdout.once("close", () => r()));
  const stderrClosed = new Promise<void>((r) => stderr.once("close", () => r()));
  const exited = new Promise<ExitStatus>((resolveExit, rejectExit) => {
    child.once("error", rejectExit);
    child.once("exit", (code, signal) => {
      live.delete(child);
      // Output may still be in the pipes: report the exit once it is all read.
      void Promise.all([stdoutClosed, stderrClosed]).then(() => resolveExit({ code, signal }));
    });
  });
  const describeExit = (s: ExitStatus) =>
    `leasequeue exited (code ${s.code}, signal ${s.signal})\n--- stderr ---\n${stderrLines.join("\n")}\n--- stdout ---\n${lines.join("\n")}`;

  const waitForLine = (pred: (line: string, json: any) => boolean): Promise<string> => {
    const seen = lines.find((l) => pred(l, parseJson(l)));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<string>((resolveLine, rejectLine) => {
      const w = { pred, resolve: resolveLine };
      watchers.add(w);
      exited.then(
        (s) => {
          if (watchers.delete(w)) rejectLine(new Error(`waiting for a log line, but ${describeExit(s)}`));
        },
        (err) => {
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on, as is, what `exited` was rejected with
          if (watchers.delete(w)) rejectLine(err);
        },
      );
    });
  };

  const listenerUrl = (msg: string) => waitForLine((_l, j) => j?.msg === msg).then((l) => JSON.parse(l).url as string);

  return new Promise<SpawnedServer>((resolveServer, rejectServer) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      rejectServer(
        new Error(`leasequeue did not log both listeners within ${START_TIMEOUT_MS} ms\n${lines.join("\n")}\n${stderrLines.join("\n")}`),
      );
    }, START_TIMEOUT_MS);
    Promise.all([listenerUrl("api listening"), listenerUrl("metrics listening")]).then(
      ([apiUrl, metricsUrl]) => {
        clearTimeout(timer);
        resolveServer({
          child,
          apiUrl,
          metricsUrl,
          lines,
          stderrLines,
          waitForLine,
          exited,
          stop(signal = "SIGTERM") {
            if (child.exitCode === null && child.signalCode === null) {
              if (options.command !== undefined) process.kill(-child.pid!, signal);
              else child.kill(signal);
            }
            return exited;
          },
        });
      },
      (err: Error) => {
        clearTimeout(timer);
        rejectServer(new Error(`leasequeue failed to start: ${err.message}`));
      },
    );
  });
}

export interface CliResult extends ExitStatus {
  stdout: string;
  stderr: string;
}

/**
 * Runs `node bin/leasequeue.js ...args` to completion (for --help, migrate, bad flags); `input`, if given, is its stdin;
 * `user`, if given, the uid and gid to run it as (which takes root).
 */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  input?: string,
  user?: { uid: number; gid: number },
): Promise<CliResult> {
  assertBuilt();
  return new Promise((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, [CLI_PATH, ...args], {
      cwd: PACKAGE_ROOT,
      env: { ...process.env, ...env },
      stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      ...user,
    });
    live.add(child);
    if (input !== undefined) child.stdin!.end(input);
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.once("error", rejectRun);
    // 'close' fires after the exit and after both pipes are drained.
    child.once("close", (code, signal) => {
      live.delete(child);
      resolveRun({ code, signal, stdout, stderr });
    });
  });
}

export interface JsonReply {
  status: number;
  body: any;
}

/**
 * One Connect JSON call with fetch, like curl. Network failures (the server
 * died) reject, as fetch does; HTTP errors resolve with their status.
 */
export async function callJson(apiUrl: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonReply> {
  const res = await fetch(`${apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text) };
}

/** Like callJson, but any non-200 answer is an error naming the call. */
export async function okJson(apiUrl: string, method: string, body: unknown, headers?: Record<string, string>): Promise<any> {
  const reply = await callJson(apiUrl, method, body, headers);
  if (reply.status !== 200) {
    throw new Error(`${method} ${JSON.stringify(body).slice(0, 200)} -> HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
  }
  return reply.body;
}

/** Every job of a queue (or of all queues), via ListJobs pagination. */
export async function listAllJobs(apiUrl: string, queue?: string): Promise<any[]> {
  const jobs: any[] = [];
  let pageToken = "";
  for (;;) {
    const page = await okJson(apiUrl, "ListJobs", { queue: queue ?? "", pageSize: 500, pageToken });
    jobs.push(...(page.jobs ?? []));
    pageToken = page.nextPageToken ?? "";
    if (pageToken === "") return jobs;
  }
}

/**
 * A temporary directory per test and the servers a test spawned in it: each
 * test gets a new `dir()`, and after it every server it started is killed
 * (SIGKILL) and the directory removed. Call once at the top of a test file.
 */
export function serversInTempDirs(prefix: string): {
  dir: () => string;
  start: (dbPath: string, extraArgs?: string[], options?: { env?: NodeJS.ProcessEnv }) => Promise<SpawnedServer>;
} {
  let dir: string | undefined;
  let servers: SpawnedServer[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), `leasequeue-${prefix}-`));
    servers = [];
  });
  afterEach(async () => {
    for (const s of servers) await s.stop("SIGKILL");
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir() {
      if (dir === undefined) throw new Error("serversInTempDirs: dir() is only available inside a test");
      return dir;
    },
    async start(dbPath, extraArgs = [], options = {}) {
      const s = await spawnServer(dbPath, extraArgs, options);
      servers.push(s);
      return s;
    },
  };
}
