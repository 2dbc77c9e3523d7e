/**
 * The SQLite store as the server uses it: a facade on the main thread over
 * the store thread (store-thread.ts), which holds the connection and runs
 * every statement, the group commit and the WAL's fsync
 * (docs/performance.md "The store thread"). The main thread never runs SQL,
 * so request handling, encoding and the streams keep the event loop while
 * SQLite works on another core.
 *
 * The facade keeps what Store promises on the main thread: the injected
 * clock (each turn's calls carry its time), the listeners of commits and
 * write outcomes (told in the order the thread reports them, which is
 * commit order), readiness (OperationStore.checkWritable, its probe a
 * write like any other), the host clock's jump watch. Calls of one turn
 * cross in one message and go into the thread's next transaction; the
 * answers and announcements of a turn of the thread come back in one.
 *
 * The thread failing (an error it did not catch, or its end while the
 * store is open) is the store failing: every call in flight and after is
 * refused STORE_UNAVAILABLE and `onThreadFailure` is told; the server
 * stops on it (app.ts), so no process lives on without its store.
 */
import { Worker } from "node:worker_threads";
import { hostClock } from "../../domain/clock.js";
import { QueueError } from "../../domain/errors.js";
import type { Job, JobEvent, JobState } from "../../domain/job.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { watchClockJumps } from "../database-clock.js";
import { OperationStore } from "../operation-store.js";
import type {
  GroupCounts,
  ListEventsSpec,
  ListGroupsSpec,
  ListJobsSpec,
  QueueActivity,
  QueueBacklog,
  QueueCounts,
  Store,
} from "../store.js";
import type { WriteArgs, WriteName, WriteResult } from "../write-calls.js";
import type { SqliteStoreOptions } from "./sqlite-store.js";
import {
  decodeError,
  packArgs,
  unpackAnswer,
  unpackChange,
  type Call,
  type FromThread,
  type ReadName,
  type StoreThreadOptions,
  type ToThread,
} from "./thread-messages.js";

export interface ThreadedSqliteStoreOptions extends SqliteStoreOptions {
  /**
   * Told once when the store thread fails (an uncaught error, or its end
   * while the store is open). Without it the failure is thrown as an
   * uncaught exception: the process ends.
   */
  onThreadFailure?(error: Error): void;
}

interface Waiting {
  name: WriteName | ReadName;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Opens the store on its thread; resolves once the database is open and migrated there, or rejects with why it could not be. */
export async function openThreadedSqliteStore(options: ThreadedSqliteStoreOptions): Promise<ThreadedSqliteStore> {
  const store = new ThreadedSqliteStore(options);
  await store.opened;
  return store;
}

export class ThreadedSqliteStore extends OperationStore implements Store {
  /** The store thread (its threadId names it in diagnostics). */
  readonly thread: Worker;
  /** Settles when the thread opened the database (or failed to). */
  readonly opened: Promise<void>;
  /** How a commit becomes durable before it is answered (see SqliteStore.durability); known once opened. */
  durability: "wal-fsync" | "none" = "wal-fsync";
  readonly #options: ThreadedSqliteStoreOptions;
  readonly #waiting = new Map<number, Waiting>();
  #nextId = 1;
  #calls: Call[] = [];
  #sendScheduled = false;
  #open = false;
  #closing: Promise<void> | undefined;
  #failed: Error | undefined;
  #settleOpen!: { resolve(): void; reject(error: unknown): void };
  #settleClosed: (() => void) | undefined;
  readonly #stopClockWatch: (() => void) | undefined;

  constructor(options: ThreadedSqliteStoreOptions) {
    super(options);
    this.#options = options;
    this.opened = new Promise<void>((resolve, reject) => (this.#settleOpen = { resolve, reject }));
    // From source (the tests), the thread runs from source too: the test runner provides the TypeScript loader, which a Worker inherits.
    const entry = new URL(import.meta.url.endsWith(".ts") ? "./store-thread.ts" : "./store-thread.js", import.meta.url);
    this.thread = new Worker(entry, { workerData: threadOptions(options), name: "leasequeue-store" });
    this.thread.on("message", (message: FromThread) => this.#receive(message));
    this.thread.on("error", (err) => this.#fail(err));
    this.thread.on("exit", (code) => {
      if (this.#settleClosed !== undefined) this.#settleClosed();
      else this.#fail(new Error(`the store thread ended (exit code ${code})`));
    });
    this.#stopClockWatch =
      options.onClockJump === undefined
        ? undefined
        : watchClockJumps({ host: hostClock(options.clock), onJump: (ms) => options.onClockJump?.(ms) });
  }

  // ------------------------------------------------------------- crossing

  protected runWrite<N extends WriteName>(name: N, args: WriteArgs<N>): Promise<WriteResult<N>> {
    return this.#call("w", name, args) as Promise<WriteResult<N>>;
  }

  #read<T>(name: ReadName, args: unknown[]): Promise<T> {
    return this.#call("r", name, args) as Promise<T>;
  }

  #call(type: "w" | "r", name: WriteName | ReadName, args: unknown[]): Promise<unknown> {
    if (this.#failed !== undefined) return Promise.reject(threadFailed(this.#failed));
    if (this.#closing !== undefined) return Promise.reject(new QueueError("STORE_UNAVAILABLE", "the store is closed"));
    const id = this.#nextId++;
    this.#calls.push([id, type, name, packArgs(name, args)] as Call);
    if (!this.#sendScheduled) {
      this.#sendScheduled = true;
      setImmediate(() => this.#send());
    }
    return new Promise((resolve, reject) => this.#waiting.set(id, { name, resolve, reject }));
  }

  /** Sends the calls of this turn, with the clock's time, in one message. */
  #send(): void {
    this.#sendScheduled = false;
    if (this.#calls.length === 0 || this.#failed !== undefined) return;
    const calls = this.#calls;
    this.#calls = [];
    this.#post({ kind: "calls", now: this.clock.now(), calls });
  }

  #post(message: ToThread): void {
    this.thread.postMessage(message);
  }

  #receive(message: FromThread): void {
    switch (message.kind) {
      case "open":
        this.durability = message.durability;
        this.#open = true;
        this.#settleOpen.resolve();
        return;
      case "openFailed":
        this.#settleClosed = () => {};
        this.#settleOpen.reject(decodeError(message.error));
        return;
      case "closed":
        // Everything is answered and the database is closed; the thread has nothing left to run.
        void this.thread.terminate();
        return;
      case "out":
        for (const item of message.items) {
          if ("a" in item) {
            const waiting = this.#waiting.get(item.a);
            if (waiting === undefined) continue;
            this.#waiting.delete(item.a);
            if ("e" in item) waiting.reject(decodeError(item.e));
            else waiting.resolve(unpackAnswer(waiting.name, item.v));
          } else if ("change" in item) this.announce(unpackChange(item.change));
          else if ("file" in item) this.#options.onDatabaseFile?.(item.file);
          else this.reportWrite(item.outcome);
        }
    }
  }

  /** The thread failed: refuse everything in flight and after, and say so once. */
  #fail(error: Error): void {
    if (this.#failed !== undefined || this.#settleClosed !== undefined) return;
    this.#failed = error;
    this.#stopClockWatch?.();
    this.#settleOpen.reject(error);
    const refusal = threadFailed(error);
    for (const waiting of this.#waiting.values()) waiting.reject(refusal);
    this.#waiting.clear();
    this.clearCommitListeners();
    void this.thread.terminate();
    if (this.#options.onThreadFailure !== undefined) this.#options.onThreadFailure(error);
    else
      process.nextTick(() => {
        throw error;
      });
  }

  // ----------------------------------------------------------------- reads

  getJob(jobId: string): Promise<Job | undefined> {
    return this.#read("getJob", [jobId]);
  }

  listJobs(spec: ListJobsSpec): Promise<Job[]> {
    return this.#read("listJobs", [spec]);
  }

  listJobEvents(jobId: string): Promise<JobEvent[]> {
    return this.#read("listJobEvents", [jobId]);
  }

  listEvents(spec: ListEventsSpec): Promise<JobEvent[]> {
    return this.#read("listEvents", [spec]);
  }

  eventBounds(): Promise<{ oldest: number; latest: number }> {
    return this.#read("eventBounds", []);
  }

  queueCounts(): Promise<QueueCounts[]> {
    return this.#read("queueCounts", []);
  }

  queueActivity(queue: string, sinceMinute: number): Promise<QueueActivity> {
    return this.#read("queueActivity", [queue, sinceMinute]);
  }

  queueBacklog(queue: string): Promise<QueueBacklog> {
    return this.#read("queueBacklog", [queue]);
  }

  listGroups(spec: ListGroupsSpec): Promise<GroupCounts[]> {
    return this.#read("listGroups", [spec]);
  }

  countPendingGroups(queue: string): Promise<number> {
    return this.#read("countPendingGroups", [queue]);
  }

  listSchedules(): Promise<StoredSchedule[]> {
    return this.#read("listSchedules", []);
  }

  nextScheduleRunTime(): Promise<number | null> {
    return this.#read("nextScheduleRunTime", []);
  }

  lastJobId(queue: string, state: JobState): Promise<string | null> {
    return this.#read("lastJobId", [queue, state]);
  }

  // ------------------------------------------------------------- lifecycle

  protected get isOpen(): boolean {
    return this.#open && this.#closing === undefined && this.#failed === undefined;
  }

  clockOffsetMs(): number {
    return 0;
  }

  /** Sends what is queued, lets the thread commit it and answer every commit once durable, then ends the thread. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#stopClockWatch?.();
    await this.opened.catch(() => {});
    if (this.#failed !== undefined || this.#settleClosed !== undefined) return;
    const ended = new Promise<void>((resolve) => (this.#settleClosed = resolve));
    this.#send();
    this.#post({ kind: "close" });
    await ended;
    this.clearCommitListeners();
  }
}

function threadOptions(options: SqliteStoreOptions): StoreThreadOptions {
  const { path, synchronous, busyTimeoutMs, maxBatch, otherWritersPollMs, maxRecoveredPerSweep, fileCheckIntervalMs } = options;
  return { path, synchronous, busyTimeoutMs, maxBatch, otherWritersPollMs, maxRecoveredPerSweep, fileCheckIntervalMs };
}

function threadFailed(error: Error): QueueError {
  return new QueueError("STORE_UNAVAILABLE", `the store thread failed: ${error.message}`);
}
