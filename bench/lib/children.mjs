/**
 * Client processes of the bench, and the guarantee that none outlives it.
 *
 * Parent side: `forkChild(script, config)` starts a Node child with an IPC
 * channel; `child.next(type, timeoutMs)` waits for its next message of that
 * type and fails (with the tail of the child's stderr) if the child exits or
 * the time runs out. `spawnTracked()` does the same bookkeeping for
 * non-Node processes (the server under test). Every tracked process is
 * killed when the bench exits, however it exits.
 *
 * Child side: `childChannel()` gives `send`, `next(type)` and a hard time
 * limit; a child also exits when its parent's IPC channel closes.
 */
import { fork, spawn } from "node:child_process";

const tracked = new Set();

function killEverything() {
  for (const proc of tracked) {
    if (proc.exitCode === null && proc.signalCode === null) {
      try {
        proc.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}
process.on("exit", killEverything);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.once(signal, () => {
    killEverything();
    process.exit(130);
  });
}

function track(proc, name) {
  tracked.add(proc);
  let stderrTail = "";
  proc.stderr?.on("data", (chunk) => {
    stderrTail = (stderrTail + chunk.toString()).slice(-4000);
  });
  const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  void exited.then(() => tracked.delete(proc));
  return { exited, stderrTail: () => stderrTail, name };
}

/** A forked Node child speaking the bench's message protocol. */
export class Child {
  constructor(script, config, name, { execArgv } = {}) {
    this.name = name;
    this.proc = fork(script, [JSON.stringify(config)], {
      stdio: ["ignore", "inherit", "pipe", "ipc"],
      serialization: "advanced",
      ...(execArgv !== undefined ? { execArgv } : {}),
    });
    const t = track(this.proc, name);
    this.exited = t.exited;
    this.stderrTail = t.stderrTail;
    this.inbox = [];
    this.waiters = [];
    this.handlers = new Map();
    this.error = undefined;
    this.proc.on("error", (err) => {
      this.error ??= new Error(`${name}: ${err.message}`);
    });
    this.proc.on("message", (msg) => {
      if (msg.type === "error") {
        this.error = new Error(`${name}: ${msg.message}`);
        for (const w of this.waiters.splice(0)) w.reject(this.error);
        return;
      }
      const handler = this.handlers.get(msg.type);
      if (handler !== undefined) return handler(msg);
      const i = this.waiters.findIndex((w) => w.type === msg.type);
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(msg);
      else this.inbox.push(msg);
    });
    void this.exited.then(({ code, signal }) => {
      for (const w of this.waiters.splice(0)) {
        w.reject(new Error(`${name} exited (code ${code}, signal ${signal}) before sending "${w.type}"\n${this.stderrTail()}`));
      }
    });
  }

  get pid() {
    return this.proc.pid;
  }

  /** Every message of `type` goes to `handler` instead of the inbox (e.g. progress counts). */
  on(type, handler) {
    this.handlers.set(type, handler);
  }

  /** The next message of `type`; rejects when the child reports an error, exits first, or `timeoutMs` passes. */
  next(type, timeoutMs) {
    if (this.error !== undefined) return Promise.reject(this.error);
    const i = this.inbox.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0]);
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return Promise.reject(new Error(`${this.name} has exited; no "${type}"\n${this.stderrTail()}`));
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        type,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (/** @type {Error} */ e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        const j = this.waiters.indexOf(waiter);
        if (j >= 0) this.waiters.splice(j, 1);
        reject(new Error(`${this.name}: no "${type}" within ${timeoutMs} ms\n${this.stderrTail()}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Sends a message; a child that has exited meanwhile (EPIPE) is not an error here: `next()` reports it. */
  send(msg) {
    if (this.proc.connected) this.proc.send(msg, () => {});
  }

  /** Asks the child to finish (message `stop`), then kills it if it has not exited within `graceMs`. */
  async stop(graceMs = 5000) {
    this.send({ type: "stop" });
    return this.kill(graceMs);
  }

  /** Waits up to `graceMs` for the child to exit by itself, then SIGKILLs it. */
  async kill(graceMs = 0) {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Forks `script` (a path) with `config` as its only argument (JSON); `options.execArgv`: Node flags of the child (e.g. --cpu-prof). */
export function forkChild(script, config, name, options) {
  return new Child(script, config, name, options);
}

/** Spawns a non-Node process (stdout piped for the caller to read) that is killed when the bench exits. */
export function spawnTracked(command, args, options, name) {
  const proc = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
  const t = track(proc, name);
  return { proc, exited: t.exited, stderrTail: t.stderrTail };
}

/**
 * The child's side: its config (argv), `send`, `next(type)`, and a hard
 * time limit after which it exits with code 3 whatever it is doing.
 */
export function childChannel() {
  const config = JSON.parse(process.argv[2] ?? "{}");
  const inbox = [];
  const waiters = [];
  process.on("message", (msg) => {
    const i = waiters.findIndex((w) => w.type === msg.type);
    if (i >= 0) waiters.splice(i, 1)[0].resolve(msg);
    else inbox.push(msg);
  });
  let finished = false;
  // The parent is gone: nobody will read our results.
  process.on("disconnect", () => {
    if (!finished) process.exit(2);
  });
  if (config.timeLimitMs !== undefined) {
    setTimeout(() => {
      process.stderr.write(`time limit of ${config.timeLimitMs} ms reached; exiting\n`);
      process.exit(3);
    }, config.timeLimitMs).unref();
  }
  const send = (msg) =>
    new Promise((resolve) => {
      if (!process.connected) return resolve();
      process.send(msg, () => resolve());
    });
  return {
    config,
    send,
    next(type) {
      const i = inbox.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(inbox.splice(i, 1)[0]);
      return new Promise((resolve) => waiters.push({ type, resolve }));
    },
    /** Runs `main`, reporting a failure to the parent as an "error" message, then exits. */
    async run(main) {
      try {
        await main();
        process.exitCode = 0;
      } catch (err) {
        await send({ type: "error", message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
        process.exitCode = 1;
      }
      // Open sockets (HTTP/2 sessions, pools) must not keep a finished child alive.
      finished = true;
      setTimeout(() => process.exit(), 200);
      if (process.connected) process.disconnect();
    },
  };
}
