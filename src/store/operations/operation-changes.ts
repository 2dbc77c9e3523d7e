/**
 * What write operations change besides job rows, collected in memory and
 * written once per transaction: the events the state machine returns, the
 * heartbeats it did not store, the queues paused or resumed, the count
 * changes per queue and state, and the queue activity per queue and minute.
 * An engine keeps one OperationChanges per operation (dropped when the
 * operation is refused or rolled back) and merges those that stay into the
 * transaction's TransactionChanges, which writes them through the port just
 * before the commit: counts summed (one row per queue and state touched,
 * however many operations), activity summed (one row per queue and minute),
 * then the events in one call, numbered by the engine.
 */
import type { EventDraft, JobEvent, JobState, StoredJob } from "../../domain/job.js";
import { leaseWaitBucket, LEASE_WAIT_BUCKETS, minuteOf } from "../../domain/queue-activity.js";
import * as machine from "../../domain/state-machine.js";
import type { QueueControlChange } from "../store.js";
import { andThen } from "./steps.js";
import type { ActivityDelta, Awaitable, CountDelta, TransactionPort } from "../transaction-port.js";

/** Count changes by `queue + "\0" + state`. */
type CountDeltas = Map<string, number>;

function addCount(counts: CountDeltas, key: string, delta: number): void {
  counts.set(key, (counts.get(key) ?? 0) + delta);
}

/**
 * The histogram of a row without leases, shared: most operations (a
 * Complete, a Submit) grant none, so a row gets an array of its own only
 * when it counts one (leaseCounted), and merging skips it.
 */
const NO_LEASES: readonly number[] = Object.freeze(new Array<number>(LEASE_WAIT_BUCKETS).fill(0));

/** An activity row with nothing counted yet. */
function emptyActivity(queue: string, minute: number): ActivityDelta {
  return { queue, minute, completed: 0, failed: 0, queued: 0, retry: 0, running: 0, leaseWaits: NO_LEASES as number[] };
}

/** Counts `n` leases in bucket `bucket` of the row's histogram. */
function leaseCounted(row: ActivityDelta, bucket: number, n: number): void {
  if (row.leaseWaits === NO_LEASES) row.leaseWaits = new Array<number>(LEASE_WAIT_BUCKETS).fill(0);
  row.leaseWaits[bucket] += n;
}

function addActivity(into: ActivityDelta, from: ActivityDelta): void {
  into.completed += from.completed;
  into.failed += from.failed;
  into.queued += from.queued;
  into.retry += from.retry;
  into.running += from.running;
  if (from.leaseWaits === NO_LEASES) return;
  for (let i = 0; i < LEASE_WAIT_BUCKETS; i++) if (from.leaseWaits[i] !== 0) leaseCounted(into, i, from.leaseWaits[i]);
}

function isZeroActivity(a: ActivityDelta): boolean {
  const noLeases = a.leaseWaits === NO_LEASES || a.leaseWaits.every((n) => n === 0);
  return a.completed === 0 && a.failed === 0 && a.queued === 0 && a.retry === 0 && a.running === 0 && noLeases;
}

/** The kinds of event that end an attempt as failed: a Fail (retried or dead-lettered), or an expired lease. */
const FAILED_ATTEMPT_KINDS: ReadonlySet<EventDraft["kind"]> = new Set(["failed", "dead_lettered", "lease_expired"]);

/**
 * The changes of one operation.
 *
 * Queue activity (docs/api.md "Queue activity") rides on this path on
 * purpose: the counters, the gauges' changes and the lease waits are all
 * known here already, from the same transitions that move the counts, so
 * keeping them costs a few additions per job in memory and one small row
 * per queue and minute per transaction, written with the counts. A
 * sampler of its own would need a timer on every server and would still
 * miss what happened between two samples.
 */
export class OperationChanges {
  readonly events: EventDraft[] = [];
  /** Heartbeats applied without a stored event (the heartbeat policy of domain/state-machine.ts). */
  readonly unrecorded: EventDraft[] = [];
  readonly queueControls: QueueControlChange[] = [];
  readonly counts: CountDeltas = new Map();
  /**
   * The queue activity of the operation (docs/api.md "Queue activity"), by
   * `queue + "\0" + minute`: the minute of each change is the time the
   * state machine gave it (a new job's create_time, a transition's
   * update_time), which is the operation's time.
   */
  readonly activity = new Map<string, ActivityDelta>();
  #lastActivity: ActivityDelta | undefined;
  /** Set by an operation that created, replaced or deleted a schedule. */
  schedulesChanged = false;

  /**
   * A count change alone. Jobs that are created or transitioned are counted
   * by created() and transitioned(), which also move the queue activity's
   * gauges; this is for what only leaves a finished state (pruning).
   */
  count(queue: string, state: JobState, delta: number): void {
    addCount(this.counts, `${queue}\0${state}`, delta);
  }

  /** A count change of a job at `time`, with the gauge of its queue's activity when the state is one. */
  #countAt(queue: string, state: JobState, delta: number, time: number): void {
    this.count(queue, state, delta);
    if (state === "queued" || state === "retry" || state === "running") this.#activityOf(queue, time)[state] += delta;
  }

  /** The row of a queue's minute; the last one is kept at hand (an operation's jobs are nearly always of one queue and minute). */
  #activityOf(queue: string, time: number): ActivityDelta {
    const minute = minuteOf(time);
    const last = this.#lastActivity;
    if (last !== undefined && last.queue === queue && last.minute === minute) return last;
    const key = `${queue}\0${minute}`;
    let row = this.activity.get(key);
    if (row === undefined) {
      row = emptyActivity(queue, minute);
      this.activity.set(key, row);
    }
    this.#lastActivity = row;
    return row;
  }

  /** A new job: counted in its state, with its SUBMITTED event. */
  created(job: StoredJob): void {
    this.#countAt(job.queue, job.state, 1, job.createTime);
    for (const e of machine.submitted(job).events) this.events.push(e);
  }

  /** A job moved by the state machine from `fromState`: counts moved, events kept. */
  transitioned(fromState: JobState, t: machine.Transition): void {
    // Every transition of the state machine sets update_time to its time.
    const { queue, updateTime: time } = t.job;
    if (fromState !== t.job.state) {
      this.#countAt(queue, fromState, -1, time);
      this.#countAt(queue, t.job.state, 1, time);
    }
    let failed = false;
    for (const e of t.events) {
      this.events.push(e);
      if (e.kind === "completed") this.#activityOf(queue, time).completed++;
      else if (e.kind === "claimed") {
        // The lease's wait: since the job became eligible (a claim leaves schedule_time as it was).
        leaseCounted(this.#activityOf(queue, time), leaseWaitBucket(Math.max(0, time - t.job.scheduleTime)), 1);
      } else if (!failed && FAILED_ATTEMPT_KINDS.has(e.kind)) {
        // An expiry with the budget spent stores two events (lease_expired, dead_lettered) for one failed attempt.
        failed = true;
        this.#activityOf(queue, time).failed++;
      }
    }
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
  /** By `queue + "\0" + minute`. */
  readonly #activity = new Map<string, ActivityDelta>();
  #schedulesChanged = false;

  add(op: OperationChanges): void {
    if (op.schedulesChanged) this.#schedulesChanged = true;
    for (const e of op.events) this.#events.push(e);
    for (const e of op.unrecorded) this.#unrecorded.push(e);
    for (const c of op.queueControls) this.#queueControls.push(c);
    for (const [key, delta] of op.counts) addCount(this.#counts, key, delta);
    for (const [key, row] of op.activity) {
      let sum = this.#activity.get(key);
      if (sum === undefined) {
        sum = emptyActivity(row.queue, row.minute);
        this.#activity.set(key, sum);
      }
      addActivity(sum, row);
    }
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
   * Writes the counts, then the activity, then the events (last, so an
   * engine numbers them right before the commit); answers at once when the
   * port does.
   */
  persist(port: TransactionPort): Awaitable<PersistedChanges> {
    const { deltas, activity, events } = this.toWrite();
    return andThen(deltas.length > 0 ? port.addCountDeltas(deltas) : undefined, () =>
      andThen(activity.length > 0 ? port.addActivity(activity) : undefined, () =>
        andThen(events.length === 0 ? [] : port.insertEvents(events), (stored) => this.persisted(stored)),
      ),
    );
  }

  /**
   * What persist writes, for an engine that sends the statements its own
   * way (PostgreSQL pipelines them with its COMMIT): the count changes
   * summed per queue and state (zero sums left out), the activity summed
   * per queue and minute (rows of zeros left out), and the events in order.
   */
  toWrite(): { deltas: CountDelta[]; activity: ActivityDelta[]; events: readonly EventDraft[] } {
    const deltas: CountDelta[] = [];
    for (const [key, delta] of this.#counts) {
      if (delta === 0) continue;
      const split = key.indexOf("\0");
      deltas.push({ queue: key.slice(0, split), state: key.slice(split + 1) as JobState, delta });
    }
    const activity = [...this.#activity.values()].filter((row) => !isZeroActivity(row));
    return { deltas, activity, events: this.#events };
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
