/**
 * What write operations change besides job rows, collected in memory and
 * written once per transaction: the events the state machine returns, the
 * heartbeats it did not store, the queues paused or resumed, and the count
 * changes per queue and state. An engine keeps one OperationChanges per
 * operation (dropped when the operation is refused or rolled back) and
 * merges those that stay into the transaction's TransactionChanges, which
 * writes them through the port just before the commit: counts summed (one
 * row per queue and state touched, however many operations), then the
 * events in one call, numbered by the engine.
 */
import type { EventDraft, JobEvent, JobState, StoredJob } from "../domain/job.js";
import * as machine from "../domain/state-machine.js";
import type { QueueControlChange } from "./store.js";
import { andThen } from "./steps.js";
import type { Awaitable, CountDelta, TransactionPort } from "./transaction-port.js";

/** Count changes by `queue + "\0" + state`. */
type CountDeltas = Map<string, number>;

function addCount(counts: CountDeltas, key: string, delta: number): void {
  counts.set(key, (counts.get(key) ?? 0) + delta);
}

/** The changes of one operation. */
export class OperationChanges {
  readonly events: EventDraft[] = [];
  /** Heartbeats applied without a stored event (the heartbeat policy of domain/state-machine.ts). */
  readonly unrecorded: EventDraft[] = [];
  readonly queueControls: QueueControlChange[] = [];
  readonly counts: CountDeltas = new Map();
  /** Set by an operation that created, replaced or deleted a schedule. */
  schedulesChanged = false;

  count(queue: string, state: JobState, delta: number): void {
    addCount(this.counts, `${queue}\0${state}`, delta);
  }

  /** A new job: counted in its state, with its SUBMITTED event. */
  created(job: StoredJob): void {
    this.count(job.queue, job.state, 1);
    for (const e of machine.submitted(job).events) this.events.push(e);
  }

  /** A job moved by the state machine from `fromState`: counts moved, events kept. */
  transitioned(fromState: JobState, t: machine.Transition): void {
    if (fromState !== t.job.state) {
      this.count(t.job.queue, fromState, -1);
      this.count(t.job.queue, t.job.state, 1);
    }
    for (const e of t.events) this.events.push(e);
    if (t.unrecorded !== undefined) for (const e of t.unrecorded) this.unrecorded.push(e);
  }
}

/** What a transaction announces once it has committed (Store.onCommitted). */
export interface PersistedChanges {
  events: JobEvent[];
  unrecorded: EventDraft[];
  queueControls: QueueControlChange[];
  schedulesChanged?: boolean;
}

/** The changes of the operations that stay in one transaction, in operation order. */
export class TransactionChanges {
  readonly #events: EventDraft[] = [];
  readonly #unrecorded: EventDraft[] = [];
  readonly #queueControls: QueueControlChange[] = [];
  readonly #counts: CountDeltas = new Map();
  #schedulesChanged = false;

  add(op: OperationChanges): void {
    if (op.schedulesChanged) this.#schedulesChanged = true;
    for (const e of op.events) this.#events.push(e);
    for (const e of op.unrecorded) this.#unrecorded.push(e);
    for (const c of op.queueControls) this.#queueControls.push(c);
    for (const [key, delta] of op.counts) addCount(this.#counts, key, delta);
  }

  /**
   * Jobs that an operation of this transaction changed: their events are
   * not written yet, so deleting such a job now (pruning) would leave them
   * without their job.
   */
  changedJobs(): ReadonlySet<string> {
    return new Set(this.#events.map((e) => e.jobId));
  }

  /**
   * Writes the counts, then the events (last, so an engine numbers them
   * right before the commit); answers at once when the port does.
   */
  persist(port: TransactionPort): Awaitable<PersistedChanges> {
    const { deltas, events } = this.toWrite();
    return andThen(deltas.length > 0 ? port.addCountDeltas(deltas) : undefined, () =>
      andThen(events.length === 0 ? [] : port.insertEvents(events), (stored) => this.persisted(stored)),
    );
  }

  /**
   * What persist writes, for an engine that sends the statements its own
   * way (PostgreSQL pipelines them with its COMMIT): the count changes
   * summed per queue and state (zero sums left out), and the events in order.
   */
  toWrite(): { deltas: CountDelta[]; events: readonly EventDraft[] } {
    const deltas: CountDelta[] = [];
    for (const [key, delta] of this.#counts) {
      if (delta === 0) continue;
      const split = key.indexOf("\0");
      deltas.push({ queue: key.slice(0, split), state: key.slice(split + 1) as JobState, delta });
    }
    return { deltas, events: this.#events };
  }

  /** What the transaction announces, given its events as stored. */
  persisted(events: JobEvent[]): PersistedChanges {
    return {
      events,
      unrecorded: this.#unrecorded,
      queueControls: this.#queueControls,
      ...(this.#schedulesChanged ? { schedulesChanged: true } : {}),
    };
  }

  /** Whether an operation of the transaction created, replaced or deleted a schedule (its NOTIFY goes with the commit). */
  get schedulesChanged(): boolean {
    return this.#schedulesChanged;
  }

  /** The queue controls of the transaction's operations so far (their NOTIFY goes with the commit). */
  get queueControls(): readonly QueueControlChange[] {
    return this.#queueControls;
  }
}
