/**
 * One conformance driver running as a child process: the same tasks in every
 * language (drivers/), configured through LEASEQUEUE_* variables, reporting
 * each worker event as a JSON line on stdout. Tests await those lines rather
 * than sleeping.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { REPO_ROOT } from "../external/tools.js";

export interface DriverCommand {
  file: string;
  args: string[];
  env?: Record<string, string>;
}

/**
 * One line a driver printed: a worker event (connected, completed, error, ...), "run" when a handler
 * starts, "ready" (with its `pid`) once the worker is made, or "ended" when the worker stopped by itself
 * on a refusal no retry can cure (its `code` and `message`; the driver then exits 1).
 */
export interface DriverEvent {
  event: string;
  job?: string;
  code?: string;
  message?: string;
  attempt?: number;
  pid?: number;
}

export interface DriverSettings {
  url: string;
  queue: string;
  concurrency?: number;
  leaseSeconds?: number;
  drainSeconds?: number;
  /** A bearer token; none when undefined. */
  token?: string;
  /** A PEM file of CA certificates for an https:// url. */
  caFile?: string;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Kills drivers a failed test left running, but those in `keep`. */
export function killDrivers(keep: ReadonlyArray<Driver | undefined> = []): void {
  for (const child of live) {
    if (keep.some((d) => d?.child === child)) continue;
    child.kill("SIGKILL");
    live.delete(child);
  }
}

export class Driver {
  readonly child: ChildProcess;
  readonly events: DriverEvent[] = [];
  readonly exited: Promise<number | null>;
  #stderr = "";
  #partial = "";
  readonly #listeners = new Set<() => void>();

  constructor(cmd: DriverCommand, settings: DriverSettings, workerId: string) {
    this.child = spawn(cmd.file, cmd.args, {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        PYTHONUNBUFFERED: "1",
        PYTHONDONTWRITEBYTECODE: "1",
        LEASEQUEUE_URL: settings.url,
        LEASEQUEUE_QUEUE: settings.queue,
        LEASEQUEUE_WORKER_ID: workerId,
        LEASEQUEUE_CONCURRENCY: String(settings.concurrency ?? 4),
        LEASEQUEUE_LEASE_SECONDS: String(settings.leaseSeconds ?? 10),
        LEASEQUEUE_DRAIN_SECONDS: String(settings.drainSeconds ?? 10),
        LEASEQUEUE_TOKEN: settings.token ?? "",
        LEASEQUEUE_CA_FILE: settings.caFile ?? "",
        ...cmd.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    live.add(this.child);
    this.child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      const lines = (this.#partial + chunk).split("\n");
      this.#partial = lines.pop()!;
      for (const line of lines) if (line.trim() !== "") this.events.push(JSON.parse(line) as DriverEvent);
      this.#notify();
    });
    this.child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      this.#stderr += chunk;
    });
    this.exited = new Promise((resolve, reject) => {
      this.child.once("error", reject);
      this.child.once("close", (code) => {
        live.delete(this.child);
        this.#notify();
        resolve(code);
      });
    });
  }

  /** The driver's log (the SDK's, on stderr), for failure messages. */
  get log(): string {
    return this.#stderr;
  }

  all(event: string): DriverEvent[] {
    return this.events.filter((e) => e.event === event);
  }

  /** Resolves once `count` events named `event` (and matching `where`) were printed; rejects on exit or timeout. */
  waitFor(event: string, count = 1, where: (e: DriverEvent) => boolean = () => true, timeoutMs = 20_000): Promise<DriverEvent[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const seen = this.events.filter((e) => e.event === event && where(e));
        if (seen.length >= count) return done(() => resolve(seen));
        if (this.child.exitCode !== null || this.child.signalCode !== null) {
          done(() => reject(new Error(`driver exited before ${count} ${event} event(s):\n${this.log}`)));
        }
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`${count} ${event} event(s) not seen within ${timeoutMs} ms:\n${this.log}`))),
        timeoutMs,
      );
      const done = (f: () => void) => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        f();
      };
      this.#listeners.add(check);
      check();
    });
  }

  /** SIGTERM, then the exit code, failing after `timeoutMs`. */
  async stop(timeoutMs = 20_000): Promise<number | null> {
    this.child.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`driver still running ${timeoutMs} ms after SIGTERM:\n${this.log}`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }
}
