/**
 * What every engine's group commit shares (SQLite: sqlite/group-commit.ts;
 * PostgreSQL: postgres/pg-transactions.ts): write operations are queued,
 * those issued in one turn of the event loop go in one transaction, and a
 * batch runs in the order its operations were issued. The engine keeps its
 * transactions (BEGIN, locks, COMMIT), its SQL and its judgement of errors.
 */
import { OperationChanges, TransactionChanges } from "../operations/operation-changes.js";
import type { WriteOperation } from "../operations/scope.js";
import { andThen, attempt, isPromiseLike } from "../operations/steps.js";
import type { Awaitable, TransactionPort } from "../transaction-port.js";

/** A write queued for an engine's next transaction, with how to answer its caller. */
export interface PendingWrite<T = unknown> {
  op: WriteOperation<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

/** What one operation of a transaction came to, kept until the commit decides whether it stands. */
export type OperationOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Writes waiting for a transaction, in the order they were issued. The
 * first write of a turn of the event loop asks the owner to run on the
 * next turn (`run`), so every write issued meanwhile is there to share its
 * transaction; while `held()` is true, writes wait for `schedule()`.
 */
export class WriteQueue {
  #pending: PendingWrite[] = [];
  #scheduled = false;
  readonly #run: () => void;
  readonly #held: () => boolean;

  constructor(run: () => void, held: () => boolean = () => false) {
    this.#run = run;
    this.#held = held;
  }

  /** Writes queued now. */
  get length(): number {
    return this.#pending.length;
  }

  /** Queues an operation; settles as its engine answers it (once it committed, or was refused). */
  write<T>(op: WriteOperation<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ op, resolve, reject } as PendingWrite);
      if (!this.#held()) this.schedule();
    });
  }

  /** Runs the owner on the next turn of the event loop, once however often asked, when anything is queued. */
  schedule(): void {
    if (this.#scheduled || this.#pending.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#run();
    });
  }

  /** Puts writes taken earlier back at the head of the queue, in their order (a transaction that could not begin yet). */
  putBack(writes: PendingWrite[]): void {
    this.#pending = writes.concat(this.#pending);
  }

  /** Takes the first `n` queued writes. */
  take(n: number): PendingWrite[] {
    return this.#pending.splice(0, n);
  }

  /**
   * Takes the queued writes that `choose` picks, asked in issue order with
   * how many it picked so far; the others stay queued, in their order.
   */
  takeWhere(choose: (write: PendingWrite, taken: number) => boolean): PendingWrite[] {
    const taken: PendingWrite[] = [];
    const left: PendingWrite[] = [];
    for (const p of this.#pending) (choose(p, taken.length) ? taken : left).push(p);
    this.#pending = left;
    return taken;
  }
}

/** A port that tells whether the current operation wrote a row; the batch runner clears it before each operation. */
export interface BatchPort extends TransactionPort {
  wrote: boolean;
}

/** How an operation's failure leaves its batch, as the engine judges it. */
export type OperationFailure<S> =
  /** The operation's own refusal, answered to its caller; the batch goes on (in a replay, once the operation's savepoint is rolled back). */
  | { refused: unknown }
  /** The transaction cannot keep the other operations (asked only without savepoints): roll it back and replay the batch with them. */
  | "replay"
  /** Nothing of the batch can go on in this transaction: the attempt ends with `stopped`. */
  | { stopped: S };

/** The engine's side of one attempt at a batch, in a transaction it has begun. */
export interface BatchTransaction<S> {
  readonly port: BatchPort;
  /** The time of an operation that starts now. */
  now(): number;
  /** Opens the savepoint of one operation (in a replay). */
  savepoint(): Awaitable<void>;
  /** The operation succeeded: releases its savepoint (having sent its writes, for a port that holds them back). */
  release(): Awaitable<void>;
  /** The operation failed: rolls back to its savepoint and releases it, undoing that operation alone. */
  rollbackToSavepoint(): Awaitable<void>;
  /** A savepoint could not be opened: how the attempt ends (or throw to end it with an error). */
  savepointFailed(error: unknown): S;
  /** An operation threw or answered a rejected promise; `guarded`: it ran in its own savepoint. Throw to end the attempt with an error. */
  failed(error: unknown, guarded: boolean): OperationFailure<S>;
}

/** A batch whose operations all ran: the changes of those that stand, and what each came to, in batch order. */
export interface BatchRun {
  changes: TransactionChanges;
  outcomes: OperationOutcome[];
  /** Whether an operation that stands wrote a row (so the commit really writes). */
  wrote: boolean;
}

/** How one attempt at a batch ended: every operation ran, a replay is needed, or the engine stopped it. */
export type BatchEnd<S> = BatchRun | "replay" | { stopped: S };

/**
 * Runs the operations of a batch in order in the engine's open
 * transaction, each in a savepoint of its own when `guarded`. The engine
 * then commits the run's changes, or rolls back (and replays, or answers
 * its stop).
 *
 * Optimistic batches: the operations decide every refusal before they
 * write (operations/scope.ts), so a batch first runs without a savepoint
 * per operation, and a refusal rolls nothing back. When an operation fails
 * in a way that may leave something of it in the transaction (it wrote, or
 * the database aborted the transaction: the engine judges), the engine
 * rolls the transaction back and replays the whole batch with a savepoint
 * around each operation, so that the failure rolls back alone and never
 * takes its neighbours with it. Nothing is answered or announced before
 * the engine's COMMIT, so the first attempt leaves no trace.
 *
 * Each step waits for the engine with steps.ts, so a batch over a port
 * that answers at once (SQLite) runs from its first operation to its last
 * without giving the event loop away.
 */
export function runOperations<S>(batch: readonly PendingWrite[], guarded: boolean, tx: BatchTransaction<S>): Awaitable<BatchEnd<S>> {
  const run: BatchRun = { changes: new TransactionChanges(), outcomes: [], wrote: false };
  const from = (start: number): Awaitable<BatchEnd<S>> => {
    for (let i = start; i < batch.length; i++) {
      const step = runOperation(batch[i].op, guarded, tx, run);
      if (step === undefined) continue;
      if (isPromiseLike(step)) return step.then((end) => (end === undefined ? from(i + 1) : end));
      return step;
    }
    return run;
  };
  return from(0);
}

type OperationEnd<S> = "replay" | { stopped: S } | undefined;

/** One operation of the batch, its outcome recorded in `run`; undefined when the batch goes on. */
function runOperation<S>(
  op: WriteOperation<unknown>,
  guarded: boolean,
  tx: BatchTransaction<S>,
  run: BatchRun,
): Awaitable<OperationEnd<S>> {
  const changes = new OperationChanges();
  tx.port.wrote = false;
  if (guarded) {
    return attempt(
      () => tx.savepoint(),
      () =>
        attempt(
          () => andThen(op({ now: tx.now(), port: tx.port, changes, earlier: run.changes }), (value) => andThen(tx.release(), () => value)),
          (value) => succeeded(value, changes, tx, run),
          (error) => failed(error, true, tx, run),
        ),
      (error) => ({ stopped: tx.savepointFailed(error) }),
    );
  }
  // Without a savepoint, the common case: no closure, and no promise unless the port answers with one.
  let value: unknown;
  try {
    value = op({ now: tx.now(), port: tx.port, changes, earlier: run.changes });
  } catch (error) {
    return failed(error, false, tx, run);
  }
  if (isPromiseLike(value)) {
    return Promise.resolve(value).then(
      (v) => succeeded(v, changes, tx, run),
      (error) => failed(error, false, tx, run),
    );
  }
  return succeeded(value, changes, tx, run);
}

function succeeded<S>(value: unknown, changes: OperationChanges, tx: BatchTransaction<S>, run: BatchRun): undefined {
  run.outcomes.push({ ok: true, value });
  run.changes.add(changes);
  if (tx.port.wrote) run.wrote = true;
  return undefined;
}

function failed<S>(error: unknown, guarded: boolean, tx: BatchTransaction<S>, run: BatchRun): Awaitable<OperationEnd<S>> {
  const verdict = tx.failed(error, guarded);
  if (verdict === "replay") {
    if (guarded) throw new Error("invariant: an operation in its own savepoint asked for a replay");
    return verdict;
  }
  if ("stopped" in verdict) return verdict;
  const refused = (): undefined => {
    run.outcomes.push({ ok: false, error: verdict.refused });
    return undefined;
  };
  // In a replay, the operation's writes go with its savepoint.
  return guarded ? andThen(tx.rollbackToSavepoint(), refused) : refused();
}

/** Answers the callers of a committed batch with their operations' outcomes, or every one with `error` (the commit was not made durable). */
export function answerBatch(batch: readonly PendingWrite[], outcomes: readonly OperationOutcome[], error?: unknown): void {
  batch.forEach((p, i) => {
    const o = outcomes[i];
    if (error !== undefined) p.reject(error);
    else if (o.ok) p.resolve(o.value);
    else p.reject(o.error);
  });
}
