/**
 * Group commit for the PostgreSQL store: write operations (store/operations/)
 * are queued and run in transactions on pooled connections, several
 * transactions at once (up to `maxConcurrent`), each taking up to
 * `maxBatch` queued operations. At low load an operation gets a
 * transaction of its own at once; under load operations wait for a free
 * connection and share its next transaction, so commits (and their WAL
 * flushes) are shared without the service knowing.
 */
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import type { Clock } from "../../domain/clock.js";
import { QueueError } from "../../domain/errors.js";
import type { EventDraft } from "../../domain/job.js";
import { answerBatch, runOperations, WriteQueue, type PendingWrite as Pending } from "../writing/batch-runner.js";
import type { PersistedChanges } from "../operations/operation-changes.js";
import type { WriteOperation } from "../operations/scope.js";
import type { QueueControlChange, WriteOutcome } from "../store.js";
import { encodeNotification, NOTIFY_SQL, notificationChannel } from "./notifications.js";
import { isConnectionError, isDatabaseError, isRetryableConflict, storeError, transactionFailure } from "./pg-errors.js";
import { PgPort } from "./pg-port.js";
import type { PgStatements } from "./pg-statements.js";

export interface PgTransactionsOptions {
  pool: pg.Pool;
  statements: PgStatements;
  clock: Clock;
  /** Most operations sharing one transaction. */
  maxBatch: number;
  /** Most transactions open at once (each holds a connection of the pool). */
  maxConcurrent: number;
  /** Marks this store's queue-control notifications, so it can tell them from other servers'. */
  origin: string;
  /**
   * A batch committed. `answer` settles its callers; the store calls it once
   * the events are numbered and announced. `outcome` is what the batch
   * proved about the database (undefined: nothing).
   */
  committed(changes: PersistedChanges, answer: () => void, outcome: WriteOutcome | undefined): void;
  /**
   * The batch's events are about to be committed (called right before the
   * COMMIT is sent: a server can hear of them through a notification before
   * the COMMIT's answer arrives). Returns what to call when they were not
   * committed after all.
   */
  committing(events: readonly EventDraft[], queueControls: readonly QueueControlChange[]): () => void;
  /** A batch that could not commit: its callers are refused; this reports why. */
  failed(outcome: WriteOutcome): void;
}

/** How often a batch that met a serialization failure or a deadlock is retried whole. */
const CONFLICT_RETRIES = 5;

/**
 * The pause before the nth retry of a conflicted batch: a random share of
 * 5 * 2^n ms, so that transactions that conflicted do not meet again in
 * step (the deadlock's other party is then likely committed).
 */
function conflictPauseMs(n: number): number {
  return Math.floor(Math.random() * 5 * 2 ** n);
}

/** A connection that failed mid-transaction: it goes back to the pool destroyed. */
class BrokenConnection extends Error {
  constructor(readonly original: unknown) {
    super(original instanceof Error ? original.message : String(original));
  }
}

/**
 * Each transaction (READ COMMITTED):
 * 1. BEGIN, then one `SELECT ... FOR UPDATE` of every job the batch's
 *    operations name by id, in id order (pg-port.ts): a transaction waits
 *    only there, holding nothing yet, so two transactions never deadlock
 *    over jobs.
 * 2. The operations in order, each awaiting the port step by step; their
 *    refusals are decided before they write, so a refusal rolls nothing back.
 * 3. Counts, queue activity and events (store/operations/operation-changes.ts), a
 *    NOTIFY per queue control, COMMIT.
 *
 * Optimistic batches, with the guarded replay of the engines' shared batch
 * runner (store/writing/batch-runner.ts): if the database raises an error inside
 * an operation (the transaction is then aborted), or an operation fails
 * after writing, the batch is replayed with a savepoint around each
 * operation. A unique violation of an idempotency key raced by another
 * transaction is such an error; in the replay the other transaction has
 * committed and the submit finds its job. Serialization failures and
 * deadlocks (never expected, but PostgreSQL may report them) retry the
 * whole batch after a short random pause (conflictPauseMs). Nothing is
 * answered or announced before the COMMIT.
 */
export class PgTransactions {
  readonly #opts: PgTransactionsOptions;
  readonly #channel: string;
  readonly #queue = new WriteQueue(() => this.#pump());
  #active = 0;
  /** Jobs named by the operations of running transactions, with how many transactions name each. */
  readonly #inFlight = new Map<string, number>();
  #idle: Array<() => void> = [];

  constructor(options: PgTransactionsOptions) {
    this.#opts = options;
    this.#channel = notificationChannel(options.statements.schema);
  }

  /** Queues an operation; settles once its transaction committed (or it was refused). */
  write<T>(op: WriteOperation<T>): Promise<T> {
    return this.#queue.write(op);
  }

  /** Resolves once nothing is queued or running. */
  drain(): Promise<void> {
    if (this.#active === 0 && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #pump(): void {
    while (this.#active < this.#opts.maxConcurrent && this.#queue.length > 0) {
      const batch = this.#takeBatch();
      if (batch.length === 0) return;
      const ids = batch.flatMap((p) => p.op.jobIds ?? []);
      for (const id of ids) this.#inFlight.set(id, (this.#inFlight.get(id) ?? 0) + 1);
      this.#active++;
      void this.#run(batch).finally(() => {
        for (const id of ids) {
          const n = this.#inFlight.get(id)!;
          if (n <= 1) this.#inFlight.delete(id);
          else this.#inFlight.set(id, n - 1);
        }
        this.#active--;
        this.#pump();
        if (this.#active === 0 && this.#queue.length === 0) for (const resolve of this.#idle.splice(0)) resolve();
      });
    }
  }

  /**
   * The next batch: queued operations in issue order, up to maxBatch, except
   * those naming a job that a running transaction holds (or that an
   * operation left waiting before them names). So operations on one job
   * commit in the order they were issued, as in SQLite, although several
   * transactions run at once; and this store's transactions never wait for
   * each other's job locks. Claims go in batches of their own, of one queue
   * each: a claim of a queue with limits waits for the queue's config row
   * (queue-limit-sql.ts), holding nothing yet, and never while its
   * transaction holds the jobs or groups another operation wrote.
   */
  #takeBatch(): Pending[] {
    const waiting = new Set<string>();
    /** undefined until the first operation is taken; then the queue its claims are of, or null for a batch without claims. */
    let claims: string | null | undefined;
    return this.#queue.takeWhere((p, taken) => {
      const ids = p.op.jobIds;
      const queue = p.op.claimsQueue ?? null;
      if (
        taken >= this.#opts.maxBatch ||
        (claims !== undefined && claims !== queue) ||
        (ids !== undefined && ids.some((id) => this.#inFlight.has(id) || waiting.has(id)))
      ) {
        if (ids !== undefined) for (const id of ids) waiting.add(id);
        return false;
      }
      claims = queue;
      return true;
    });
  }

  async #run(batch: Pending[]): Promise<void> {
    // A pooled connection that died while idle (the database restarted, a
    // backend was terminated) fails at BEGIN, before anything could commit:
    // the batch then goes to a fresh connection. Twice at most, so an
    // outage is answered at once rather than retried forever.
    for (let stale = 0; ; stale++) {
      const outcome = await this.#runOnConnection(batch, stale < 2);
      if (outcome !== "stale") return;
    }
  }

  async #runOnConnection(batch: Pending[], mayRetryStale: boolean): Promise<"stale" | undefined> {
    let client: pg.PoolClient;
    try {
      client = await this.#opts.pool.connect();
    } catch (err) {
      this.#refuseAll(batch, err);
      return undefined;
    }
    // A checked-out client's connection errors are ours to handle (the pool
    // listens only while it is idle); unhandled, they would end the process.
    let lost: Error | undefined;
    const onError = (err: Error) => (lost ??= err);
    client.on("error", onError);
    let broken: unknown;
    // BEGIN goes out with the transaction's first statements (the
    // connection pipelines), not a round trip ahead of them: a submit of new
    // jobs is then one round trip, BEGIN to COMMIT. If BEGIN fails, none of
    // what follows it can commit alone (#attempt checks, after the COMMIT).
    const begun = client.query("BEGIN").then(
      () => undefined,
      (err: unknown) => err,
    );
    try {
      let guarded = false;
      let conflicts = 0;
      for (let began = true; ; began = false) {
        let result: "replay" | "retry" | "done";
        try {
          result = await this.#attempt(client, batch, guarded, began ? begun : undefined);
        } catch (err) {
          const failedBegin = began ? await begun : undefined;
          if (failedBegin === undefined) throw err;
          broken = failedBegin;
          if (isConnectionError(failedBegin) && mayRetryStale) return "stale";
          this.#refuseAll(batch, failedBegin);
          return undefined;
        }
        if (result === "done") return undefined;
        if (result === "replay") guarded = true;
        else if (++conflicts > CONFLICT_RETRIES) {
          this.#refuseAll(
            batch,
            new QueueError("STORE_UNAVAILABLE", "the transaction kept conflicting with concurrent ones", { cause: "busy" }),
          );
          return undefined;
        } else await delay(conflictPauseMs(conflicts - 1));
      }
    } catch (err) {
      // A fault of the connection or of this runner: nothing of the batch is known to have committed.
      broken = err instanceof BrokenConnection ? err.original : err;
      this.#refuseAll(batch, broken);
      return undefined;
    } finally {
      client.off("error", onError);
      const destroy = lost ?? (broken !== undefined && isConnectionError(broken) ? (broken as Error) : undefined);
      client.release(destroy);
    }
  }

  #refuseAll(batch: Pending[], error: unknown): void {
    const refusal = storeError(error);
    for (const p of batch) p.reject(refusal);
    this.#opts.failed(transactionFailure(error));
  }

  /** Runs a statement of the transaction's own (BEGIN, SAVEPOINT, COMMIT...): a failure there breaks the connection's use. */
  async #control(client: pg.PoolClient, text: string): Promise<void> {
    try {
      await client.query(text);
    } catch (err) {
      throw new BrokenConnection(err);
    }
  }

  async #rollback(client: pg.PoolClient): Promise<void> {
    await this.#control(client, "ROLLBACK");
  }

  /**
   * One try of the batch in a transaction. `begun`: the answer to the BEGIN
   * the caller already sent (an error, or undefined once it succeeded);
   * without it, this try sends its own.
   */
  async #attempt(
    client: pg.PoolClient,
    batch: Pending[],
    guarded: boolean,
    begun: Promise<unknown> | undefined,
  ): Promise<"replay" | "retry" | "done"> {
    const { statements, clock } = this.#opts;
    if (begun === undefined) await this.#control(client, "BEGIN");
    const port = new PgPort(client, statements);
    try {
      await port.lockJobs(batch.flatMap((p) => p.op.jobIds ?? []));
    } catch (err) {
      await this.#rollback(client);
      if (isConnectionError(err)) throw new BrokenConnection(err);
      if (isRetryableConflict(err)) return "retry";
      this.#refuseAll(batch, err);
      return "done";
    }
    let mark: ReturnType<PgPort["mark"]> | undefined;
    const end = await runOperations<"retry">(batch, guarded, {
      port,
      now: () => clock.now(),
      savepoint: () => {
        mark = port.mark();
        return this.#control(client, "SAVEPOINT op");
      },
      release: async () => {
        // Its writes are sent inside its savepoint, so a failure of theirs is its own.
        await port.flush();
        await this.#control(client, "RELEASE SAVEPOINT op");
      },
      rollbackToSavepoint: async () => {
        await this.#control(client, "ROLLBACK TO SAVEPOINT op");
        await this.#control(client, "RELEASE SAVEPOINT op");
        port.restore(mark!);
      },
      savepointFailed: (err) => {
        throw err;
      },
      failed: (err, inSavepoint) => {
        if (err instanceof BrokenConnection || isConnectionError(err)) throw err;
        if (isRetryableConflict(err)) return { stopped: "retry" };
        if (inSavepoint) return { refused: storeError(err) };
        if (isDatabaseError(err) || port.wrote) return "replay";
        return { refused: err };
      },
    });
    if (end === "replay" || "stopped" in end) {
      await this.#rollback(client);
      return end === "replay" ? end : end.stopped;
    }
    const { changes, outcomes, wrote } = end;
    // The end of the transaction in one round trip (the pool's connections
    // pipeline, pool.ts): the last job rows, the counts, the activity, the events, the
    // queue controls' NOTIFYs and COMMIT, sent together and then awaited.
    // A failure of any of them aborts the transaction, and PostgreSQL then
    // answers the COMMIT with a ROLLBACK (no error), so the answers are
    // checked, not only the COMMIT.
    const { deltas, activity, events } = changes.toWrite();
    const sent: Array<Promise<unknown>> = [port.flush()];
    if (deltas.length > 0) sent.push(port.addCountDeltas(deltas));
    if (activity.length > 0) sent.push(port.addActivity(activity));
    const stored = events.length > 0 ? port.insertEvents(events) : Promise.resolve([]);
    sent.push(stored);
    for (const control of changes.queueControls) {
      const payload = encodeNotification({
        kind: "queue_control",
        queue: control.queue,
        paused: control.paused,
        ...(control.config !== undefined ? { config: control.config } : {}),
        origin: this.#opts.origin,
      });
      sent.push(client.query(NOTIFY_SQL, [this.#channel, payload]));
    }
    if (changes.schedulesChanged) {
      sent.push(client.query(NOTIFY_SQL, [this.#channel, encodeNotification({ kind: "schedules", origin: this.#opts.origin })]));
    }
    const withdraw = this.#opts.committing(events, changes.queueControls);
    const commit = client.query("COMMIT");
    const [ends, committed] = await Promise.all([
      Promise.allSettled(sent),
      commit.then(
        (r) => r,
        (err: unknown) => err as Error,
      ),
    ]);
    // A failed BEGIN (sent with the first statements) is the batch's failure:
    // the connection was lost (nothing after it ran) or sat in an aborted
    // transaction (everything after it failed, and the COMMIT was a ROLLBACK).
    const failed = (await begun) ?? (ends.find((e): e is PromiseRejectedResult => e.status === "rejected")?.reason as unknown);
    if (committed instanceof Error || failed !== undefined || committed.command !== "COMMIT") withdraw();
    if (committed instanceof Error) {
      // Whether a COMMIT whose answer was lost took effect is unknown: refuse, as for a failed one.
      if (isConnectionError(committed)) throw new BrokenConnection(committed);
      if (isRetryableConflict(committed)) return "retry";
      this.#refuseAll(batch, committed);
      return "done";
    }
    if (failed !== undefined || committed.command !== "COMMIT") {
      const err = failed ?? new Error(`the transaction ended with ${committed.command}, not COMMIT`);
      if (isConnectionError(err)) throw new BrokenConnection(err);
      // Rolled back already (the COMMIT of an aborted transaction is a ROLLBACK).
      if (isRetryableConflict(err)) return "retry";
      // The batch's last writes went out only now: whichever operation made
      // them, the guarded replay sends each operation's own inside its savepoint.
      if (!guarded && isDatabaseError(err)) return "replay";
      this.#refuseAll(batch, err);
      return "done";
    }
    const persisted = changes.persisted(await stored);
    const answer = () => answerBatch(batch, outcomes);
    this.#opts.committed(persisted, answer, wrote || persisted.events.length > 0 ? { ok: true } : undefined);
    return "done";
  }
}
