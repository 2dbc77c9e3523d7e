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
 *
 * Optimistic batches: each operation runs without a savepoint, because the
 * operations decide every refusal before they write (the port's `wrote` is
 * still false), so a refusal needs no rollback. If an operation fails after
 * writing (a bug, or an error that SQLite did not treat as fatal), the
 * transaction is rolled back and the batch replayed with a savepoint
 * around each operation, so that the failure rolls back alone. Nothing is
 * answered or announced before the COMMIT, so the first attempt leaves no
 * trace. When SQLite itself rolls the transaction back (disk full, I/O
 * error), nothing of the batch can commit and every call is refused.
 *
 * The operations are steps (store/steps.ts) and the SQLite port answers
 * at once, so a whole transaction runs synchronously, from BEGIN to COMMIT,
 * without giving the event loop away (settledNow insists): no timer, I/O
 * callback or other store on the same file runs while it is open, and
 * another SqliteStore in this process never waits for its write lock.
 */
import type Database from "better-sqlite3";
import type { Clock } from "../../domain/clock.js";
import { OperationChanges, TransactionChanges, type PersistedChanges } from "../operation-changes.js";
import type { OperationOutcome as Outcome, PendingWrite as Pending, WriteOperation } from "../operations/scope.js";
import { settledNow } from "../steps.js";
import type { WriteOutcome } from "../store.js";
import type { SqlitePort } from "./sqlite-port.js";
import { otherWriteFailure, storeError, writeFailureOf } from "./write-failures.js";

export interface GroupCommitOptions {
  db: Database.Database;
  port: SqlitePort;
  clock: Clock;
  /** Most operations sharing one transaction. */
  maxBatch: number;
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

export class GroupCommit {
  readonly #opts: GroupCommitOptions;
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;
  #queue: Pending[] = [];
  #flushScheduled = false;

  constructor(options: GroupCommitOptions) {
    this.#opts = options;
    this.#savepoint = options.db.prepare("SAVEPOINT op");
    this.#release = options.db.prepare("RELEASE op");
    this.#rollbackTo = options.db.prepare("ROLLBACK TO op");
  }

  /** Queues an operation for the next transaction; settles once it committed (or was refused). */
  write<T>(op: WriteOperation<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ op, resolve, reject } as Pending);
      if (this.#opts.held?.() !== true) this.#scheduleFlush();
    });
  }

  /** The hold ended (the fsync returned): what was queued meanwhile commits on the next turn. */
  resume(): void {
    if (this.#queue.length > 0) this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Commits everything queued now, in transactions of at most maxBatch operations. */
  flush(): void {
    this.#flushScheduled = false;
    while (this.#queue.length > 0) this.#commitBatch(this.#queue.splice(0, this.#opts.maxBatch));
  }

  #commitBatch(batch: Pending[]): void {
    try {
      if (this.#runBatch(batch, false) === "replay") this.#runBatch(batch, true);
    } catch (err) {
      // A fault of the group commit itself: nothing of the batch is known to have committed.
      if (this.#opts.db.inTransaction) this.#opts.db.exec("ROLLBACK");
      this.#opts.ended();
      this.#refuseAll(batch, err, otherWriteFailure(err));
    }
  }

  #refuseAll(batch: Pending[], error: unknown, outcome: WriteOutcome): void {
    for (const p of batch) p.reject(error);
    this.#opts.failed(outcome);
  }

  #runBatch(batch: Pending[], guarded: boolean): "replay" | undefined {
    const { db, port, clock } = this.#opts;
    try {
      db.exec("BEGIN IMMEDIATE");
      port.nextSequence = this.#opts.began() + 1;
    } catch (err) {
      if (db.inTransaction) db.exec("ROLLBACK");
      this.#opts.ended();
      this.#refuseAll(batch, storeError(err), writeFailureOf(err) ?? otherWriteFailure(err));
      return undefined;
    }
    const changes = new TransactionChanges();
    const outcomes: Outcome[] = [];
    let fatal: unknown;
    // The first failure of the disk seen in this transaction, and whether an
    // operation that stays in it wrote a row (so its COMMIT really writes).
    let failure: WriteOutcome | undefined;
    let wrote = false;
    for (const p of batch) {
      if (fatal !== undefined) {
        outcomes.push({ ok: false, error: fatal });
        continue;
      }
      const opChanges = new OperationChanges();
      port.wrote = false;
      if (guarded) {
        try {
          this.#savepoint.run();
        } catch (err) {
          failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
          fatal = storeError(err);
          outcomes.push({ ok: false, error: fatal });
          continue;
        }
      }
      try {
        const value = settledNow(p.op({ now: clock.now(), port, changes: opChanges, earlier: changes }));
        if (guarded) this.#release.run();
        outcomes.push({ ok: true, value });
        changes.add(opChanges);
        if (port.wrote) wrote = true;
      } catch (err) {
        failure ??= writeFailureOf(err);
        if (!db.inTransaction) {
          // SQLite rolled the whole transaction back (disk full, I/O error):
          // nothing of this batch can commit.
          failure ??= otherWriteFailure(err);
          fatal = storeError(err);
          outcomes.push({ ok: false, error: fatal });
        } else if (guarded) {
          this.#rollbackTo.run();
          this.#release.run();
          outcomes.push({ ok: false, error: storeError(err) });
        } else if (port.wrote) {
          db.exec("ROLLBACK");
          this.#opts.ended();
          return "replay";
        } else {
          outcomes.push({ ok: false, error: storeError(err) });
        }
      }
    }
    let persisted: PersistedChanges | undefined;
    if (fatal === undefined) {
      try {
        persisted = settledNow(changes.persist(port));
        db.exec("COMMIT");
      } catch (err) {
        failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
        fatal = storeError(err);
      }
    }
    if (fatal !== undefined || persisted === undefined) {
      if (db.inTransaction) db.exec("ROLLBACK");
      this.#opts.ended();
      this.#refuseAll(batch, fatal, failure ?? otherWriteFailure(fatal));
      return undefined;
    }
    this.#opts.ended();
    const answer = (error?: unknown) => {
      batch.forEach((p, i) => {
        const o = outcomes[i];
        if (error !== undefined) p.reject(error);
        else if (o.ok) p.resolve(o.value);
        else p.reject(o.error);
      });
    };
    this.#opts.committed(persisted, answer, failure ?? (wrote || persisted.events.length > 0 ? { ok: true } : undefined));
    return undefined;
  }
}
