/**
 * The per-transaction port: everything the engine-neutral write operations
 * (store/operations/) ask of one database transaction. An engine implements
 * it over its own SQL and runs the operations inside transactions of its own
 * making (SQLite: group commit on one connection; PostgreSQL: a pooled
 * connection per transaction). The operations decide; the port only reads
 * and writes rows.
 */
import type { DependencyResult, DependentCounts } from "../domain/dependencies.js";
import type { EventDraft, JobEvent, JobState, StoredJob } from "../domain/job.js";
import type { ActivityCounts } from "../domain/queue-activity.js";
import type { GroupLimit, QueueConfig, WindowGrants } from "../domain/queue-limits.js";
import type { PrunableState } from "../domain/retention.js";
import type { StoredSchedule } from "../domain/schedule.js";

/** A value now, or later. */
export type Awaitable<T> = T | Promise<T>;

/** One change of a queue's count in one state, summed over a transaction. */
export interface CountDelta {
  queue: string;
  state: JobState;
  delta: number;
}

/**
 * What one transaction adds to a queue's activity sample of one minute
 * (docs/api.md "Queue activity"), summed over its operations: one row per
 * queue and minute however many jobs it changed.
 */
export interface ActivityDelta extends ActivityCounts {
  queue: string;
}

/** A schedule's run recorded: its times after the run (Schedule.next_run_time and last_run_time). */
export interface ScheduleRunUpdate {
  name: string;
  nextRunTime: number | null;
  lastRunTime: number;
  updateTime: number;
}

/** A finished job due for pruning: enough to delete it and count it. */
export interface PrunableJob {
  id: string;
  queue: string;
  state: PrunableState;
}

/** An ordered group's head (TransactionPort.readGroups). */
export interface OrderedHead {
  job: StoredJob;
  /** Another transaction holds the pending head (it may be changing it): the claim passes the group over for now. */
  busy: boolean;
}

/** What TransactionPort.readGroups reads. */
export interface GroupRead {
  runningAtMost: number;
  grantsAfter: number | null;
  heads: boolean;
}

/** One group as TransactionPort.readGroups answers it. */
export interface GroupState {
  groupKey: string;
  running: number;
  grants: WindowGrants;
  /** Read with `heads`: the head, or undefined when the group has no open job. */
  head: OrderedHead | undefined;
}

/** A fair queue's group as a claim reads it (TransactionPort.selectDueGroups). */
export interface DueGroup {
  groupKey: string;
  servedSeq: number;
  version: number;
}

/** One edge of the dependency graph: `jobId` depends on `dependsOnId`, `position` its place in the job's depends_on. */
export interface DependencyEdge {
  jobId: string;
  dependsOnId: string;
  position: number;
}

/**
 * What every engine keeps:
 * - Reads see the transaction's own earlier writes, including those of
 *   earlier operations of the same transaction.
 * - Any method may answer at once or with a promise: SQLite answers at once
 *   (better-sqlite3 is synchronous), PostgreSQL with a promise. The
 *   operations wait only for a promise (store/operations/steps.ts), so over a port that
 *   answers at once they answer at once too.
 * - Rows a method selects for change are the transaction's until it ends:
 *   SQLite holds the database's write lock for the whole transaction;
 *   PostgreSQL locks them (`findJobs` and `findSchedule`: FOR UPDATE; the
 *   selections of claimable, expired, prunable and bulk jobs and of due
 *   schedules: FOR UPDATE SKIP LOCKED, so that concurrent transactions take
 *   different rows and never wait on each other's). Claims of a queue with
 *   limits must also take turns with each other, across servers, from
 *   reading the limits to the commit (`queueConfig` inside a claim:
 *   PostgreSQL locks the queue's config row FOR UPDATE), or two of them
 *   could each see room for the same place.
 * - Plural methods take and return many rows, so an engine can use
 *   multi-row statements (one claim of 100 jobs, one SubmitBatch of 500).
 * - Refusals are decided by the operations before they write, so a refused
 *   operation normally leaves nothing to roll back; an error of the
 *   database itself is the engine's to handle (retry, savepoints).
 * - Counts, activity and events are written once per transaction, after
 *   every operation of it (store/operations/operation-changes.ts): `addCountDeltas`
 *   with the changes summed per queue and state and `addActivity` with the
 *   queue activity summed per queue and minute (PostgreSQL: delta rows for
 *   both, never one row per queue that every writer would wait on), then
 *   `insertEvents` last, right before the commit, so an engine can number
 *   the events in commit order there (docs/postgresql.md "Event order
 *   across servers").
 */
export interface TransactionPort {
  /** The jobs with these ids, in the same order; undefined where none exists. */
  findJobs(ids: readonly string[]): Awaitable<Array<StoredJob | undefined>>;
  /** For each (queue, idempotency key): the job it names, in the same order; undefined where none. */
  findByIdempotencyKeys(keys: ReadonlyArray<{ queue: string; key: string }>): Awaitable<Array<StoredJob | undefined>>;
  /** Inserts new jobs. */
  insertJobs(jobs: readonly StoredJob[]): Awaitable<void>;
  /** Writes the mutable columns of jobs after their transitions (by id). */
  updateJobs(jobs: readonly StoredJob[]): Awaitable<void>;

  // Dependencies (docs/api.md "Workflows"; store/operations/dependencies.ts).
  /**
   * Records the edges of jobs inserted in this transaction and marks every
   * job they depend on as having dependents (has_dependents). The
   * dependencies were read with findJobs (PostgreSQL: locked), so a
   * transition of one of them either committed before (its state was read)
   * or sees these edges.
   */
  insertDependencies(edges: readonly DependencyEdge[]): Awaitable<void>;
  /**
   * Adds `change` to the counts of every job that depends on `dependencyId`
   * and answers them as the change left them (PostgreSQL: locked, in id
   * order): O(1) per edge, whatever the number of dependents.
   */
  countDependencyChange(dependencyId: string, change: { completed: number; failed: number }): Awaitable<DependentCounts[]>;
  /** Each job's first `limit` direct dependencies in depends_on order, with their states and results (Lease.dependencies). */
  dependencyResults(jobIds: readonly string[], limit: number): Awaitable<DependencyResult[][]>;

  /**
   * Up to `limit` eligible jobs of a queue (QUEUED or RETRY with
   * schedule_time <= now) in claim order: priority descending, then
   * schedule_time, then id (docs/api.md "Claim order").
   */
  selectClaimable(queue: string, now: number, limit: number): Awaitable<StoredJob[]>;
  /** The earliest schedule_time among the queue's QUEUED or RETRY jobs not eligible at `now` (schedule_time > now), or null. */
  nextScheduledTime(queue: string, now: number): Awaitable<number | null>;
  /** Up to `limit` RUNNING jobs whose lease expired (lease_expire_time <= now), oldest expiry first; of one queue when given. */
  selectExpiredLeases(now: number, limit: number, queue?: string): Awaitable<StoredJob[]>;
  /**
   * A bulk transition's batch: jobs of `queue` in `state` with
   * afterId < id <= upToId, in id order, at most `limit`.
   */
  selectJobsInStateBetween(queue: string, state: JobState, afterId: string, upToId: string, limit: number): Awaitable<StoredJob[]>;

  /** Whether claims of the queue hand out nothing (docs/api.md "Queue controls"). */
  isQueuePaused(queue: string): Awaitable<boolean>;
  /** Records a pause; true when the queue was not paused before. */
  pauseQueue(queue: string, now: number): Awaitable<boolean>;
  /** Removes a pause; true when the queue was paused. */
  resumeQueue(queue: string): Awaitable<boolean>;

  /** The schedule of this name (docs/api.md "Schedules"), or undefined. */
  findSchedule(name: string): Awaitable<StoredSchedule | undefined>;
  /** Stores a schedule, replacing the one of the same name if there is one. */
  upsertSchedule(schedule: StoredSchedule): Awaitable<void>;
  /** Deletes a schedule; true when it existed. */
  deleteSchedule(name: string): Awaitable<boolean>;
  /** Up to `limit` schedules that are not paused and whose next_run_time <= now, earliest first. */
  selectDueSchedules(now: number, limit: number): Awaitable<StoredSchedule[]>;
  /** Writes the run times of schedules after their runs (by name). */
  recordScheduleRuns(runs: readonly ScheduleRunUpdate[]): Awaitable<void>;

  /**
   * The queue's config, or undefined when it was never set (or set back to
   * NO_QUEUE_LIMITS). Claims of a queue that has one are serialized from
   * here to their commit (PostgreSQL: the row is read FOR UPDATE), so that
   * the running count and the grants they read next cannot change under them.
   */
  queueConfig(queue: string): Awaitable<QueueConfig | undefined>;
  /** Stores the queue's config; undefined removes it (the queue has no limits). */
  setQueueConfig(queue: string, config: QueueConfig | undefined, now: number): Awaitable<void>;
  /**
   * RUNNING jobs of the queue, counting at most `atMost` (enough to compare
   * with max_running). Counted from the jobs themselves, so that it includes
   * the claims of this transaction, whose counts are not written yet.
   */
  countRunning(queue: string, atMost: number): Awaitable<number>;
  /** The queue's recorded lease grants with a time after `after`: how many leases, and the oldest grant's time. */
  leaseGrantsSince(queue: string, after: number): Awaitable<WindowGrants>;
  /**
   * Records `leases` leases granted at `at` (adding to a grant recorded at
   * the same time), and forgets the queue's grants at or before
   * `forgetThrough`: no later claim's window reaches them.
   */
  recordLeaseGrant(queue: string, at: number, leases: number, forgetThrough: number): Awaitable<void>;
  /** Forgets every recorded grant of the queue (its rate limit was removed). */
  forgetLeaseGrants(queue: string): Awaitable<void>;

  // Groups (docs/api.md "Groups"; store/operations/group-claim.ts).
  /**
   * Up to `perGroup` eligible jobs of each group of `groupKeys` (distinct;
   * "" for the jobs without a group), in claim order, one list per key in
   * the keys' order (PostgreSQL: one statement for them all).
   */
  selectGroupsClaimable(queue: string, groupKeys: readonly string[], now: number, perGroup: number): Awaitable<StoredJob[][]>;
  /**
   * What a claim reads of each group of `groupKeys` (distinct, not ""), in
   * the keys' order (PostgreSQL: a statement or two for them all): RUNNING
   * jobs counted up to `read.runningAtMost` (from the jobs, so with this
   * transaction's claims; 0: not counted), the recorded lease grants after
   * `read.grantsAfter` (null: not read), and with `read.heads` the head of
   * an ordered group: its open job (QUEUED, RETRY or RUNNING) submitted
   * first (lowest id). A pending head is held by this transaction
   * (PostgreSQL: locked) unless `busy`; a claim never waits for a head that
   * another transaction holds (PostgreSQL: a pending head locked elsewhere
   * is `busy`, a RUNNING head is read, not locked), so a claim holding its
   * queue's config row waits for no job's lock.
   */
  readGroups(queue: string, groupKeys: readonly string[], read: GroupRead): Awaitable<GroupState[]>;
  /** Records each group's `leases` granted at `at`, and forgets those groups' grants at or before `forgetThrough`. */
  recordGroupLeaseGrants(
    queue: string,
    at: number,
    grants: ReadonlyArray<{ groupKey: string; leases: number }>,
    forgetThrough: number,
  ): Awaitable<void>;
  /** Forgets every recorded group grant of the queue (its group rate limit was removed). */
  forgetGroupLeaseGrants(queue: string): Awaitable<void>;
  /**
   * A fair queue's groups that may have eligible jobs (due_time <= now), the
   * least recently served first (served_seq, then group_key), after
   * `after`, at most `limit`. The engine keeps a row per group of a fair
   * queue with pending jobs: inserting a pending job, making one pending
   * (or moving its schedule_time) sets the row's due_time to at most that
   * schedule_time, and a lease of the group that finishes sets it to at
   * most that time; each of these also moves the row's version.
   */
  selectDueGroups(queue: string, now: number, after: DueGroup | null, limit: number): Awaitable<DueGroup[]>;
  /**
   * Sets when fair claims look at the group again: `dueTime` (null: when
   * one of its leases finishes), and the rule that held it, unless its
   * version moved since the claim read it (something made it due again
   * meanwhile).
   */
  parkGroup(queue: string, group: DueGroup, dueTime: number | null, heldBy: GroupLimit): Awaitable<void>;
  /** The rule of one of the fair queue's groups parked until a lease finishes, or null when none is. */
  heldGroupRule(queue: string): Awaitable<GroupLimit | null>;
  /**
   * A group in which the claim found no eligible job: its due_time becomes
   * its earliest pending schedule_time, or null while it has only running
   * jobs, and its row goes when it has no open job; unless its version moved.
   */
  settleGroup(queue: string, group: DueGroup): Awaitable<void>;
  /** The groups served by this claim, in the order served: each is now served more recently than every other group of the queue. */
  markGroupsServed(queue: string, groupKeys: readonly string[]): Awaitable<void>;
  /** The earliest due_time after `now` among the fair queue's groups, or null. */
  nextGroupDueTime(queue: string, now: number): Awaitable<number | null>;
  /** The queue became fair: a row for each of its groups with pending jobs, due at its earliest pending schedule_time. */
  rebuildGroups(queue: string): Awaitable<void>;
  /** The queue is no longer fair: its group rows go. */
  dropGroups(queue: string): Awaitable<void>;

  /** Up to `limit` jobs in `state` finished before `finishedBefore` (epoch ms), oldest finished first. */
  selectPrunable(state: PrunableState, finishedBefore: number, limit: number): Awaitable<PrunableJob[]>;
  /**
   * Deletes jobs with all their events, and records that the history up to
   * the highest sequence deleted has a hole (Store.eventBounds). Returns how
   * many events went with them.
   */
  deleteJobs(ids: readonly string[]): Awaitable<{ events: number }>;

  /** The readiness probe's small real write (Store.checkWritable). */
  touchWriteProbe(now: number): Awaitable<void>;

  /** Adds the transaction's count changes (non-zero, summed per queue and state). Called at most once per transaction. */
  addCountDeltas(deltas: readonly CountDelta[]): Awaitable<void>;
  /**
   * Adds the transaction's queue activity (summed per queue and minute, none
   * all zero) to the stored samples. Called at most once per transaction,
   * after addCountDeltas.
   */
  addActivity(deltas: readonly ActivityDelta[]): Awaitable<void>;
  /** Deletes up to `limit` activity samples of minutes before `beforeMinute` (the oldest first); answers how many. */
  deleteActivityBefore(beforeMinute: number, limit: number): Awaitable<number>;
  /**
   * Stores the transaction's events in the order given and answers them
   * with their sequences: strictly increasing in that order, and larger than
   * every sequence of an earlier commit. Called at most once per
   * transaction, as its last statement before the commit.
   */
  insertEvents(drafts: readonly EventDraft[]): Awaitable<JobEvent[]>;
}
