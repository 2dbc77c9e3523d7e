/**
 * The seam between the service and a database. Every engine (store/sqlite/,
 * store/postgres/) implements this interface and must pass the contract
 * suite in test/store/contract/ unchanged. What is not SQL is shared:
 * the write operations (store/operations/, over the per-transaction port of
 * store/transaction-port.ts) and what runs them (store/writing/), the state
 * machine (domain/state-machine.ts), the row mapping (store/rows/) and the
 * read models (store/reads/); an engine keeps only its SQL, its
 * transactions and its notifications.
 */
import type { Clock } from "../domain/clock.js";
import type { EventDraft, Job, JobEvent, JobState } from "../domain/job.js";
import type { ActivityCounts } from "../domain/queue-activity.js";
import type { ClaimHold, QueueConfig, QueueConfigUpdate } from "../domain/queue-limits.js";
import type { PrunableState, PruneCutoffs } from "../domain/retention.js";
import type { ScheduleSpec, StoredSchedule } from "../domain/schedule.js";
import type { NewJob } from "../domain/submission.js";
import type { DependencyResult } from "../domain/dependencies.js";

export interface SubmitOutcome {
  job: Job;
  /** True when the idempotency key matched an existing job. */
  deduplicated: boolean;
}

export interface ClaimRequestSpec {
  queue: string;
  workerId: string;
  leaseDurationMs: number;
  maxJobs: number;
}

export interface ClaimedLease {
  job: Job;
  leaseToken: string;
  /**
   * The job's direct dependencies with their states and results, the first
   * LEASE_DEPENDENCIES_LIMIT in depends_on order (Lease.dependencies);
   * absent when it has none.
   */
  dependencies?: DependencyResult[];
}

/** A claim's leases, and what a claimer that got fewer than it asked for waits for: a queue limit, or the next job to become eligible. */
export interface ClaimOutcome {
  leases: ClaimedLease[];
  /** Null unless a limit of the queue (QueueConfig) left eligible jobs unleased. */
  heldBack: ClaimHold | null;
  /**
   * When the claim took fewer jobs than it asked for and no limit held one
   * back: the earliest schedule_time among the queue's pending jobs that
   * were not eligible yet at the claim's time, read in the claim's own
   * transaction; null when there is none, when the queue is paused, or when
   * the claim was full or held back. Read with the claim and at the claim's
   * time, a job that becomes due after the claim looked is still in it (a
   * time already past: claim again at once), so a claimer that waits for it
   * never misses one; work committed after the claim wakes claimers
   * through the commit announcement.
   */
  nextScheduleTime: number | null;
}

export interface ListJobsSpec {
  queue?: string;
  states?: JobState[];
  /** Only jobs of this group (docs/api.md "Groups"); undefined: any. */
  groupKey?: string;
  limit: number;
  /** Keyset cursor: only jobs with an id smaller than this (older). */
  beforeId?: string;
  /** Only the jobs this job depends on (docs/api.md "Workflows"). */
  dependenciesOf?: string;
  /** Only the jobs that depend on this job, whatever their state. */
  dependentsOf?: string;
}

/** ListGroups: a page of a queue's groups with unfinished jobs, in group_key order. */
export interface ListGroupsSpec {
  queue: string;
  /** Only groups after this key (keyset cursor); "" from the start. */
  afterKey: string;
  limit: number;
}

/** One group's unfinished jobs (GroupStats). */
export interface GroupCounts {
  groupKey: string;
  queued: number;
  running: number;
  retry: number;
  /** The earliest schedule_time of its QUEUED and RETRY jobs; null when none. */
  oldestPendingTime: number | null;
}

export interface ListEventsSpec {
  afterSequence: number;
  limit: number;
  queue?: string;
  jobId?: string;
}

export interface QueueCounts {
  queue: string;
  counts: Record<JobState, number>;
  /** Schedule time of the longest-waiting eligible job, or null if none. */
  oldestPendingSince: number | null;
  /** Paused by pauseQueue: claims hand out nothing. A paused queue is listed even without jobs. */
  paused: boolean;
  /** The queue's limits (NO_QUEUE_LIMITS when none). A queue with limits is listed even without jobs. */
  config: QueueConfig;
}

/**
 * One queue's work as an autoscaler counts it (docs/operations.md
 * "Autoscaling workers"), read in one snapshot.
 */
export interface QueueBacklog {
  /** QUEUED and RETRY jobs whose schedule_time has come: what a claim could lease now, queue limits aside. */
  eligible: number;
  running: number;
  /**
   * The earliest schedule_time among the queue's QUEUED and RETRY jobs that
   * are not eligible yet, or null: when `eligible` grows without a commit.
   */
  nextEligibleTime: number | null;
  /** Paused by pauseQueue: its eligible jobs are not leased until it is resumed. */
  paused: boolean;
}

/**
 * A queue paused or resumed (docs/api.md "Queue controls"), or its limits
 * changed (UpdateQueue, docs/api.md "Queue limits"). Queue-level changes are
 * not job events: they are announced beside them, never stored as JobEvents.
 */
export interface QueueControlChange {
  queue: string;
  /** Whether the queue is paused after the commit (for a limits change: unchanged). */
  paused: boolean;
  /** Set when the commit changed the queue's limits: the limits after it (NO_QUEUE_LIMITS when removed). */
  config?: QueueConfig;
}

/** What one committed transaction changed, announced after the commit. */
export interface CommittedChange {
  /** The stored events, in sequence order. */
  events: JobEvent[];
  /**
   * Heartbeats and progress reports applied in this commit whose event the
   * heartbeat or progress policy did not store (domain/state-machine.ts): no
   * sequence, never in ListJobEvents or WatchEvents; for counting only.
   */
  unrecorded: EventDraft[];
  /** Queues whose paused state or limits this commit changed, in commit order (usually none). */
  queueControls: QueueControlChange[];
  /**
   * True when the commit created, replaced or deleted a schedule (docs/api.md
   * "Schedules"), so a server's scheduler may have to set its timer again.
   * Not a job event: announced beside them, like queue controls.
   */
  schedulesChanged?: boolean;
  /**
   * True when the commit was made through another store instance on the
   * same database. Its `unrecorded` heartbeats are then unknown (empty), and
   * per-instance counters (metrics) leave it to the instance that made it.
   * An event of another instance's that was pruned before this instance
   * read it is not announced (retention deletes only jobs finished long ago).
   */
  external: boolean;
}

/** One bounded pruning transaction: which finished jobs may go, and how many at most. */
export interface PruneSpec {
  /** Jobs of each listed state whose finish_time is before its cutoff (epoch ms). */
  finishedBefore: PruneCutoffs;
  /** Most jobs deleted by this call. */
  limit: number;
}

export interface PrunedJobs {
  queue: string;
  state: PrunableState;
  jobs: number;
}

export interface PruneOutcome {
  /** Jobs deleted, by queue and state (only non-zero entries). */
  pruned: PrunedJobs[];
  /** Events deleted with them. */
  events: number;
  /** Fewer than `limit` jobs matched: nothing else is due now. */
  exhausted: boolean;
}

/** One bounded transaction of activity pruning: samples of minutes before `beforeMinute`, at most `limit`. */
export interface ActivityPruneSpec {
  beforeMinute: number;
  limit: number;
}

export interface ActivityPruneOutcome {
  /** Samples deleted. */
  samples: number;
  /** Fewer than `limit` matched: nothing else is due now. */
  exhausted: boolean;
}

/**
 * One stored sample of a queue's activity (docs/api.md "Queue activity"):
 * what its jobs did in one minute.
 */
export type ActivitySample = ActivityCounts;

/** A queue's activity as Store.queueActivity reads it: its samples and its counts now, of one snapshot. */
export interface QueueActivity {
  /** Oldest first; minutes without activity have no sample. */
  samples: ActivitySample[];
  /** The queue's QUEUED, RETRY and RUNNING jobs now, consistent with the samples (the gauges are counted back from them). */
  counts: { queued: number; retry: number; running: number };
}

/** How RedriveAll and PurgeQueue run their batches (Store.redriveAll, Store.purgeQueue). */
export interface BulkOptions {
  /** Jobs per batch and transaction. Default BULK_BATCH_JOBS. */
  batchJobs?: number;
  /**
   * Stops between batches when aborted (a server shutting down), throwing
   * its reason; the batches committed so far stay. Default: never.
   */
  signal?: AbortSignal;
}

/** What a bulk transition does to each job it selects; the state machine decides the rest. */
export type BulkAction = { kind: "redrive" } | { kind: "cancel"; reason: string };

/**
 * One batch of a bulk transition (RedriveAll, PurgeQueue): jobs of `queue`
 * in `state` with `afterId < id <= upToId`, in id order. Keyset bounds make
 * every job visited at most once per operation and the whole operation
 * finite while producers keep submitting (src/store/writing/bulk-transitions.ts).
 */
export interface BulkBatchSpec {
  queue: string;
  state: JobState;
  /** Only jobs of this task; others are examined and passed over. */
  task?: string;
  /** Exclusive lower bound of the ids ("" for the first batch). */
  afterId: string;
  /** Inclusive upper bound of the ids: the largest id in the state when the operation began. */
  upToId: string;
  /** Most jobs examined: bounds the transaction (and so the write-lock hold). */
  scan: number;
  /** Most jobs moved. */
  take: number;
  action: BulkAction;
}

export interface BulkBatchOutcome {
  moved: number;
  /** The largest id examined: the next batch starts after it. */
  lastExaminedId: string | null;
  /** True when no job is left in the range after lastExaminedId. */
  exhausted: boolean;
}

/** One run of a schedule submitted by fireDueSchedules. */
export interface FiredRun {
  schedule: string;
  /** The run time the schedule named (not when it was fired). */
  runTime: number;
  /** The job of the run: created now, or (submitted false) found under the run's idempotency key. */
  job: Job;
  /** False when the run's job existed already (another server submitted this run first). */
  submitted: boolean;
}

export type CommitListener = (change: CommittedChange) => void;

/**
 * Why a write transaction failed, as the database reports it: `disk_full`
 * (no space left), `io_error` (the files cannot be written, e.g. immutable
 * or a failing device), `busy` (another process held the write lock past the
 * busy timeout), `readonly` (the database or its directory is read-only),
 * `file_lost` (SQLite: the database file was removed, renamed or replaced
 * while the server ran; sqlite/lost-file.ts), `other` (anything else that
 * kept a transaction from committing).
 */
export type WriteFailureCause = "disk_full" | "io_error" | "busy" | "readonly" | "file_lost" | "other";

export const WRITE_FAILURE_CAUSES: readonly WriteFailureCause[] = ["disk_full", "io_error", "busy", "readonly", "file_lost", "other"];

/**
 * The outcome of one write transaction that either changed the database or
 * failed. Transactions that changed nothing (a Claim that found no job)
 * prove nothing about the disk and are not reported.
 */
export type WriteOutcome = { ok: true } | { ok: false; cause: WriteFailureCause; message: string };

/** Told the outcome of write transactions, after each one; readiness and metrics follow it. */
export type WriteOutcomeListener = (outcome: WriteOutcome) => void;

/**
 * What every engine keeps:
 * - Each mutating call is atomic: the state change and its events (those
 *   the state machine returns to be stored) commit together, before the
 *   returned promise resolves.
 * - Transitions are computed by src/domain/state-machine.ts, never by SQL.
 * - Calls may be grouped into one transaction (group commit); a refused call
 *   never affects another call of the same group.
 * - Time comes from the injected Clock.
 */
export interface Store {
  /**
   * The clock of every time this store writes or compares; the server's
   * loops and handlers take their time from it too. On SQLite it is the
   * host's clock; on PostgreSQL it follows the database's clock, so that
   * several servers agree whatever their hosts' clocks say
   * (docs/postgresql.md "Which clock decides").
   */
  readonly clock: Clock;
  /** The database's clock minus the host's wall clock, in ms, as last measured (0 on SQLite: the host's clock is the database's). */
  clockOffsetMs(): number;
  /** Creates the jobs, all or nothing, in request order. */
  submit(jobs: NewJob[]): Promise<SubmitOutcome[]>;
  /**
   * Leases up to maxJobs eligible jobs, recovering expired leases of the
   * queue first, and never past the queue's limits (updateQueueConfig);
   * also tells when a queue limit held eligible jobs back (dispatch/ waits on that).
   */
  claimOutcome(spec: ClaimRequestSpec): Promise<ClaimOutcome>;
  /**
   * Extends an active lease; with `progressJson` (compact JSON text) it also
   * replaces the job's progress (docs/api.md "Snooze and progress"), whose
   * PROGRESS event the progress policy stores at most once a second per job.
   */
  heartbeat(jobId: string, leaseToken: string, leaseDurationMs?: number, progressJson?: string): Promise<Job>;
  complete(jobId: string, leaseToken: string, resultJson: string | null): Promise<Job>;
  fail(jobId: string, leaseToken: string, failure: { error: string; permanent: boolean; retryDelayMs?: number }): Promise<Job>;
  /** Gives back an unstarted lease: eligible again at once, attempt refunded. */
  release(jobId: string, leaseToken: string): Promise<Job>;
  /**
   * Puts a running job back to QUEUED, eligible at now + delayMs (0..30 days,
   * validated by the caller), with the claim's attempt refunded (docs/api.md
   * "Snooze and progress"). Fenced by the lease token like complete.
   */
  snooze(jobId: string, leaseToken: string, delayMs: number): Promise<Job>;
  redrive(jobId: string): Promise<Job>;
  /**
   * QUEUED or RETRY -> CANCELLED; with `includeRunning`, a RUNNING job too,
   * its lease revoked (a later call with its token is LEASE_REJECTED).
   */
  cancel(jobId: string, reason: string, includeRunning?: boolean): Promise<Job>;
  /** Recovers every expired lease; returns how many jobs moved. */
  recoverExpiredLeases(): Promise<number>;
  /**
   * Deletes, in one transaction, up to `limit` jobs finished before their
   * state's cutoff (oldest first within a state), with all their events; keeps the counts
   * right and frees their idempotency keys. Advances the pruned-through
   * sequence (see eventBounds) past every event it deleted.
   */
  pruneJobs(spec: PruneSpec): Promise<PruneOutcome>;
  /**
   * Deletes, in one transaction, up to `limit` queue activity samples of
   * minutes before `beforeMinute`, oldest first (the retention pruner keeps
   * a day of them, domain/queue-activity.ts ACTIVITY_RETENTION_MS).
   */
  pruneActivity(spec: ActivityPruneSpec): Promise<ActivityPruneOutcome>;

  /**
   * Pauses a queue (docs/api.md "Queue controls"): from this commit on, claim
   * hands out no lease of it (every path: Claim, long-polls, StreamClaims,
   * Work); it keeps accepting submits, and its leases already out run on.
   * Persisted; any valid name may be paused, with or without jobs. True when
   * it was not paused before.
   */
  pauseQueue(queue: string): Promise<boolean>;
  /** Resumes a paused queue; true when it was paused. The change is announced so claimers wake at once. */
  resumeQueue(queue: string): Promise<boolean>;
  /**
   * Changes a queue's limits (docs/api.md "Queue limits"): the fields named
   * take their new values, the others keep theirs; answers the limits after
   * the change. Persisted; any valid name may be configured, with or without
   * jobs. A real change is announced (a queueControls entry with `config`) so
   * that claimers held back by the old limits wake at once. Removing the rate
   * limit forgets the queue's recorded grants.
   */
  updateQueueConfig(queue: string, update: QueueConfigUpdate): Promise<QueueConfig>;
  /** The largest id among the queue's jobs in `state`, or null: where a bulk transition stops. */
  lastJobId(queue: string, state: JobState): Promise<string | null>;
  /** One bounded batch of a bulk transition, in a transaction of its own. */
  bulkTransition(spec: BulkBatchSpec): Promise<BulkBatchOutcome>;
  /**
   * RedriveAll (docs/api.md "Queue controls"): DEAD -> QUEUED for the
   * queue's dead jobs (of `task` when given), at most `limit` (0: all), in
   * batches of a transaction each (store/writing/bulk-transitions.ts);
   * answers how many moved.
   */
  redriveAll(spec: { queue: string; task?: string; limit: number }, options?: BulkOptions): Promise<number>;
  /** PurgeQueue: the queue's WAITING, QUEUED and RETRY jobs -> CANCELLED (reason "purged"), in batches; answers how many. */
  purgeQueue(queue: string, options?: BulkOptions): Promise<number>;

  /**
   * Creates a schedule (docs/api.md "Schedules"), or replaces the one of the
   * same name. Its next run is computed from now; a replacement that keeps
   * the timing (cron or interval, and time zone) of a schedule that was
   * running keeps its next run, so creating the same schedules at every
   * deploy neither shifts nor skips runs. The last run is kept.
   */
  createSchedule(spec: ScheduleSpec): Promise<StoredSchedule>;
  /** Deletes a schedule (its jobs stay); SCHEDULE_NOT_FOUND when there is none of that name. */
  deleteSchedule(name: string): Promise<void>;
  /**
   * Submits, in one transaction, the due run of each due schedule (at most
   * `limit` schedules): the template under the idempotency key
   * `schedule:<name>:<run time>` through the shared submit, a SCHEDULED
   * event right before the job's SUBMITTED one, and the schedule's next
   * and last run times advanced. After downtime only the latest missed run
   * is submitted. A run whose key already names a job (another server got
   * there first) is not submitted again. Earliest due first. With
   * `newTraces`, each run's job carries the root context of a new trace
   * (domain/trace-context.ts newRootTraceContext), for the server's PRODUCER
   * span of the run; without, no trace context (docs/api.md "Trace context").
   */
  fireDueSchedules(limit: number, newTraces?: boolean): Promise<FiredRun[]>;
  /** Every schedule, ordered by name. */
  listSchedules(): Promise<StoredSchedule[]>;
  /** The earliest next_run_time of the schedules that are not paused, or null when none will run. */
  nextScheduleRunTime(): Promise<number | null>;

  getJob(jobId: string): Promise<Job | undefined>;
  /** Newest first. */
  listJobs(spec: ListJobsSpec): Promise<Job[]>;
  /** Oldest first; empty when the job has no events or does not exist. */
  listJobEvents(jobId: string): Promise<JobEvent[]>;
  /** Stored events after a sequence, oldest first. */
  listEvents(spec: ListEventsSpec): Promise<JobEvent[]>;
  /**
   * Where a replay can start. `latest`: the highest sequence ever issued
   * (0 when none). `oldest`: the first sequence of the unbroken history:
   * every event with a sequence >= oldest is still stored. Pruning leaves
   * holes (events of jobs still alive can be older than pruned ones), so
   * this is one past the highest pruned sequence, or the smallest stored
   * sequence if that is larger; 0 when no event is stored.
   */
  eventBounds(): Promise<{ oldest: number; latest: number }>;
  /** Counts per queue and state, maintained transactionally, paused queues and queue limits; ordered by queue. */
  queueCounts(): Promise<QueueCounts[]>;
  /**
   * A queue's activity samples (docs/api.md "Queue activity") of the
   * minutes from `sinceMinute` on, oldest first, with its QUEUED, RETRY and
   * RUNNING counts, all read in one snapshot: every transaction that moves
   * a count records the change in its minute's sample, so the counts at the
   * end of any minute are the counts now less the changes of the minutes
   * after it. Whichever store instance answers, it answers the same (the
   * samples are rows of the database, written with the transitions).
   */
  queueActivity(queue: string, sinceMinute: number): Promise<QueueActivity>;
  /**
   * The queue's backlog, from the maintained counts (queueCounts) less the
   * pending jobs whose schedule_time is still ahead: costs a lookup per job
   * that waits for its time (a delayed job or a retry in its backoff), not
   * per eligible job.
   */
  queueBacklog(queue: string): Promise<QueueBacklog>;
  /** Groups of the queue with unfinished jobs (jobs without a group are not listed), in group_key order. */
  listGroups(spec: ListGroupsSpec): Promise<GroupCounts[]>;
  /** How many groups of the queue have QUEUED or RETRY jobs (jobs without a group not counted); costs a lookup per group. */
  countPendingGroups(queue: string): Promise<number>;
  /**
   * Subscribes to committed changes; returns the unsubscribe function.
   *
   * What the upper layers rely on from it (dispatch/: claim streams,
   * long-poll wake-ups, the WatchEvents feed; maintenance/: the schedules'
   * timer; metrics):
   * - Every stored event is announced after the transaction that stored it
   *   committed (and, where the engine answers only durable commits, once it
   *   is durable): a listener that reads the store sees what it was told of.
   * - Exactly once per store instance, in sequence order: the sequences one
   *   instance announces are strictly increasing, with no event left out
   *   (other than events pruned before the instance could read them, see
   *   CommittedChange.external), whichever instance committed them.
   * - Commits made through another store instance on the same database (a
   *   second server, or a second store in one process) are announced too,
   *   marked `external`, promptly (SQLite: within its poll interval, and
   *   always before this instance's own next commit is announced).
   * - Queue controls are announced the same way; heartbeats and progress
   *   reports that the event policies did not store only by the instance
   *   that applied them.
   */
  onCommitted(listener: CommitListener): () => void;
  /** Subscribes to the outcome of write transactions; returns the unsubscribe function. */
  onWriteOutcome(listener: WriteOutcomeListener): () => void;
  /**
   * Throws (STORE_UNAVAILABLE) unless the database is open, migrated and
   * takes writes now. Answers from the latest write transaction when it is
   * recent; otherwise makes a small real write (durable like any commit) to
   * find out, at most once per probe interval however often it is asked.
   */
  checkWritable(): Promise<void>;
  close(): Promise<void>;
}
