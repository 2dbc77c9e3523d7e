/**
 * Group commit for the SQLite store: every write operation
 * (store/operations/) is queued; on the next turn of the event loop all
 * queued operations run in ONE `BEGIN IMMEDIATE` transaction, in the order
 * they were issued, and one COMMIT (one fsync, wal-sync.ts) makes them all
 * durable. Concurrent requests therefore share fsyncs without the service
 * knowing. While the previous commits' fsync runs (`held`), new operations
 * keep queueing, over as many turns as the fsync takes, and commit together
 * when it returns: their answers would wait for the next fsync anyway, and
 * one transaction writes the shared pages (counts, index roots) once, so
 * fewer transactions carry the same jobs (docs/performance.md).
 */
import type Database from "better-sqlite3";
import type { Clock } from "../../domain/clock.js";
import { answerBatch, runOperations, WriteQueue, type PendingWrite } from "../writing/batch-runner.js";
import type { PersistedChanges } from "../operations/operation-changes.js";
import type { WriteOperation } from "../operations/scope.js";
import { settledNow } from "../operations/steps.js";
import type { WriteOutcome } from "../store.js";
import type { SqlitePort } from "./sqlite-port.js";
import { otherWriteFailure, storeError, writeFailureOf } from "./write-failures.js";

export interface GroupCommitOptions {
  db: Database.Database;
  port: SqlitePort;
  clock: Clock;
  /** Most operations sharing one transaction. */
  maxBatch: number;
  /** How long a batch waits for another connection's write lock before it is refused as busy. */
  busyTimeoutMs: number;
  /** Right after each BEGIN, under the write lock: the highest sequence issued so far (events are numbered from the next). */
  began(): number;
  /** Right after each transaction ended (COMMIT or ROLLBACK), before its callers are told. */
  ended(): void;
  /**
   * A batch committed. `answer` settles its callers (or refuses them all
   * with `error`, for a commit that could not be made durable); the store
   * calls it once the commit is durable, then announces `changes`.
   * `outcome` is what the batch proved about the disk (undefined: nothing).
   */
  committed(changes: PersistedChanges, answer: (error?: unknown) => void, outcome: WriteOutcome | undefined): void;
  /** A batch that could not commit: its callers are refused; this reports why. */
  failed(outcome: WriteOutcome): void;
  /**
   * True while the commits made so far wait for their fsync: operations
   * queued meanwhile wait too, and go in one transaction when `resume()` is
   * called (their answers would wait for the next fsync anyway). Default:
   * never held.
   */
  held?(): boolean;
}

/** The longest SQLite waits for a lock inside one call (the connection's busy timeout): the event loop's longest stall on a lock. */
export const BUSY_SLICE_MS = 10;
/** The longest pause between two tries for a write lock another connection holds. */
const BUSY_RETRY_MAX_MS = 100;

/**
 * The queue, the optimistic batch and its guarded replay are the engines'
 * shared batch runner (store/writing/batch-runner.ts); this file keeps SQLite's
 * transaction and its hold. An operation that fails after writing (a bug,
 * or an error that SQLite did not treat as fatal) has the batch replayed
 * with a savepoint around each operation. When SQLite itself rolls the
 * transaction back (disk full, I/O error), nothing of the batch can commit
 * and every call is refused.
 *
 * Another connection's write lock (a `leasequeue prune`, a sqlite3 shell
 * inside a transaction) is waited for without holding the event loop:
 * SQLite's own busy wait is kept to a slice (the connection's busy
 * timeout, BUSY_SLICE_MS), and a BEGIN that still finds the lock taken puts
 * its batch back and tries again on a timer, with everything queued
 * meanwhile, until `busyTimeoutMs` has passed since the first try; then
 * the batch is refused as busy.
 *
 * The operations are steps (store/operations/steps.ts) and the SQLite port answers
 * at once, so a whole transaction runs synchronously, from BEGIN to COMMIT,
 * without giving the event loop away (settledNow insists): no timer, I/O
 * callback or other store on the same file runs while it is open, and
 * another SqliteStore in this process never waits for its write lock.
 */
export class GroupCommit {
  readonly #opts: GroupCommitOptions;
  /** While another connection holds the write lock: when the first try failed (performance.now()) and the retry's timer. */
  #busy: { since: number; retryMs: number; timer: NodeJS.Timeout | undefined } | undefined;
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;
  readonly #queue: WriteQueue;

  constructor(options: GroupCommitOptions) {
    this.#opts = options;
    this.#savepoint = options.db.prepare("SAVEPOINT op");
    this.#release = options.db.prepare("RELEASE op");
    this.#rollbackTo = options.db.prepare("ROLLBACK TO op");
    this.#queue = new WriteQueue(
      () => this.flush(),
      () => this.#busy !== undefined || options.held?.() === true,
    );
  }

  /** Queues an operation for the next transaction; settles once it committed (or was refused). */
  write<T>(op: WriteOperation<T>): Promise<T> {
    return this.#queue.write(op);
  }

  /** The hold ended (the fsync returned): what was queued meanwhile commits on the next turn. */
  resume(): void {
    if (this.#busy === undefined) this.#queue.schedule();
  }

  /** Commits everything queued now, in transactions of at most maxBatch operations. */
  flush(): void {
    while (this.#queue.length > 0 && this.#busy?.timer === undefined) this.#commitBatch(this.#queue.take(this.#opts.maxBatch));
    // Waited past busyTimeoutMs: every batch of this flush was refused (or began); the next write waits afresh.
    if (this.#busy !== undefined && this.#busy.timer === undefined) this.#busy = undefined;
  }

  /** The store closes: what is queued commits now, or is refused as busy if another connection still holds the write lock. */
  flushNow(): void {
    if (this.#busy?.timer !== undefined) clearTimeout(this.#busy.timer);
    this.#busy = { since: -Infinity, retryMs: BUSY_SLICE_MS, timer: undefined };
    this.flush();
  }

  #commitBatch(batch: PendingWrite[]): void {
    try {
      const ran = this.#runBatch(batch, false);
      if (ran === "busy") this.#waitForLock(batch);
      else if (ran === "replay") this.#runBatch(batch, true);
    } catch (err) {
      // A fault of the group commit itself: nothing of the batch is known to have committed.
      if (this.#opts.db.inTransaction) this.#opts.db.exec("ROLLBACK");
      this.#opts.ended();
      this.#refuseAll(batch, err, otherWriteFailure(err));
    }
  }

  /** BEGIN found another connection's write lock: the batch goes back to the head of the queue and is tried again later. */
  #waitForLock(batch: PendingWrite[]): void {
    this.#queue.putBack(batch);
    const busy = (this.#busy ??= { since: performance.now(), retryMs: BUSY_SLICE_MS, timer: undefined });
    const retryMs = busy.retryMs;
    busy.retryMs = Math.min(BUSY_RETRY_MAX_MS, retryMs * 2);
    busy.timer = setTimeout(() => {
      busy.timer = undefined;
      this.flush();
    }, retryMs);
  }

  #refuseAll(batch: PendingWrite[], error: unknown, outcome: WriteOutcome): void {
    for (const p of batch) p.reject(error);
    this.#opts.failed(outcome);
  }

  /** Ends a transaction that cannot commit: rolled back, every call refused with `error`. */
  #abort(batch: PendingWrite[], error: unknown, failure: WriteOutcome | undefined): undefined {
    if (this.#opts.db.inTransaction) this.#opts.db.exec("ROLLBACK");
    this.#opts.ended();
    this.#refuseAll(batch, error, failure ?? otherWriteFailure(error));
    return undefined;
  }

  #runBatch(batch: PendingWrite[], guarded: boolean): "replay" | "busy" | undefined {
    const { db, port, clock } = this.#opts;
    try {
      db.exec("BEGIN IMMEDIATE");
    } catch (err) {
      if (isBusy(err) && !guarded && (this.#busy === undefined || performance.now() - this.#busy.since < this.#opts.busyTimeoutMs)) {
        return "busy";
      }
      return this.#abort(batch, storeError(err), writeFailureOf(err) ?? otherWriteFailure(err));
    }
    this.#busy = undefined;
    try {
      port.nextSequence = this.#opts.began() + 1;
    } catch (err) {
      return this.#abort(batch, storeError(err), writeFailureOf(err) ?? otherWriteFailure(err));
    }
    // The first failure of the disk seen in this transaction.
    let failure: WriteOutcome | undefined;
    const end = settledNow(
      runOperations<unknown>(batch, guarded, {
        port,
        now: () => clock.now(),
        savepoint: () => void this.#savepoint.run(),
        release: () => void this.#release.run(),
        rollbackToSavepoint: () => {
          this.#rollbackTo.run();
          this.#release.run();
        },
        savepointFailed: (err) => {
          failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
          return storeError(err);
        },
        failed: (err, inSavepoint) => {
          failure ??= writeFailureOf(err);
          if (!db.inTransaction) {
            // SQLite rolled the whole transaction back (disk full, I/O error):
            // nothing of this batch can commit.
            failure ??= otherWriteFailure(err);
            return { stopped: storeError(err) };
          }
          return !inSavepoint && port.wrote ? "replay" : { refused: storeError(err) };
        },
      }),
    );
    if (end === "replay") {
      db.exec("ROLLBACK");
      this.#opts.ended();
      return "replay";
    }
    if ("stopped" in end) return this.#abort(batch, end.stopped, failure);
    let persisted: PersistedChanges;
    try {
      persisted = settledNow(end.changes.persist(port));
      db.exec("COMMIT");
    } catch (err) {
      failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
      return this.#abort(batch, storeError(err), failure);
    }
    this.#opts.ended();
    const answer = (error?: unknown) => answerBatch(batch, end.outcomes, error);
    this.#opts.committed(persisted, answer, failure ?? (end.wrote || persisted.events.length > 0 ? { ok: true } : undefined));
    return undefined;
  }
}

/** Another connection holds the lock (SQLITE_BUSY, SQLITE_LOCKED): write-failures.ts tells it as any write failure. */
function isBusy(err: unknown): boolean {
  const failure = writeFailureOf(err);
  return failure !== undefined && !failure.ok && failure.cause === "busy";
}
