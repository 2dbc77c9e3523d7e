/**
 * The seam between the service and a database. Every engine (SQLite now,
 * PostgreSQL next) implements this interface and must pass the contract
 * suite in test/store/contract.ts unchanged.
 *
 * Rules every implementation keeps:
 * - Each mutating call is atomic: the state change and its events (those
 *   the state machine returns to be stored) commit together, before the
 *   returned promise resolves.
 * - Transitions are computed by src/domain/state-machine.ts, never by SQL.
 * - Calls may be grouped into one transaction (group commit); a refused call
 *   never affects another call of the same group.
 * - Time comes from the injected Clock.
 */
import type { EventDraft, Job, JobEvent, JobState } from "../domain/job.js";
import type { PrunableState, PruneCutoffs } from "../domain/retention.js";
import type { NewJob } from "../domain/submission.js";

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
}

export interface ListJobsSpec {
  queue?: string;
  states?: JobState[];
  limit: number;
  /** Keyset cursor: only jobs with an id smaller than this (older). */
  beforeId?: string;
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
}

/** What one committed transaction changed, announced after the commit. */
export interface CommittedChange {
  /** The stored events, in sequence order. */
  events: JobEvent[];
  /**
   * Heartbeats applied in this commit whose event the heartbeat policy did
   * not store (domain/state-machine.ts): no sequence, never in ListJobEvents
   * or WatchEvents; for counting only.
   */
  unrecorded: EventDraft[];
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

export type CommitListener = (change: CommittedChange) => void;

/**
 * Why a write transaction failed, as the database reports it: `disk_full`
 * (no space left), `io_error` (the files cannot be written, e.g. immutable
 * or a failing device), `busy` (another process held the write lock past the
 * busy timeout), `readonly` (the database or its directory is read-only),
 * `other` (anything else that kept a transaction from committing).
 */
export type WriteFailureCause = "disk_full" | "io_error" | "busy" | "readonly" | "other";

export const WRITE_FAILURE_CAUSES: readonly WriteFailureCause[] = ["disk_full", "io_error", "busy", "readonly", "other"];

/**
 * The outcome of one write transaction that either changed the database or
 * failed. Transactions that changed nothing (a Claim that found no job)
 * prove nothing about the disk and are not reported.
 */
export type WriteOutcome = { ok: true } | { ok: false; cause: WriteFailureCause; message: string };

/** Told the outcome of write transactions, after each one; readiness and metrics follow it. */
export type WriteOutcomeListener = (outcome: WriteOutcome) => void;

export interface Store {
  /** Creates the jobs, all or nothing, in request order. */
  submit(jobs: NewJob[]): Promise<SubmitOutcome[]>;
  /** Leases up to maxJobs eligible jobs, recovering expired leases of the queue first. */
  claim(spec: ClaimRequestSpec): Promise<ClaimedLease[]>;
  heartbeat(jobId: string, leaseToken: string, leaseDurationMs?: number): Promise<Job>;
  complete(jobId: string, leaseToken: string, resultJson: string | null): Promise<Job>;
  fail(
    jobId: string,
    leaseToken: string,
    failure: { error: string; permanent: boolean; retryDelayMs?: number },
  ): Promise<Job>;
  /** Gives back an unstarted lease: eligible again at once, attempt refunded. */
  release(jobId: string, leaseToken: string): Promise<Job>;
  redrive(jobId: string): Promise<Job>;
  cancel(jobId: string, reason: string): Promise<Job>;
  /** Recovers every expired lease; returns how many jobs moved. */
  recoverExpiredLeases(): Promise<number>;
  /**
   * Deletes, in one transaction, up to `limit` jobs finished before their
   * state's cutoff (oldest first within a state), with all their events; keeps the counts
   * right and frees their idempotency keys. Advances the pruned-through
   * sequence (see eventBounds) past every event it deleted.
   */
  pruneJobs(spec: PruneSpec): Promise<PruneOutcome>;

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
  /** Counts per queue and state, maintained transactionally. */
  queueCounts(): Promise<QueueCounts[]>;
  /** Earliest schedule_time among pending jobs of a queue that are not yet eligible. */
  nextScheduledTime(queue: string): Promise<number | null>;

  /** Subscribes to committed changes; returns the unsubscribe function. */
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
