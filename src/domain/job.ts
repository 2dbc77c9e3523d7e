/** The domain model of a job, independent of protobuf and of SQL. Times are epoch milliseconds. */
import type { TraceContext } from "./trace-context.js";

/** "waiting": a job whose dependencies have not all finished (docs/api.md "Workflows"); appended, as on the wire. */
export const JOB_STATES = ["queued", "running", "retry", "completed", "dead", "cancelled", "waiting"] as const;
export type JobState = (typeof JOB_STATES)[number];

/** Whether a job in this state has ended (COMPLETED, DEAD or CANCELLED): what WaitJob waits for. A DEAD job may still be redriven. */
export function hasEnded(state: JobState): boolean {
  return state === "completed" || state === "dead" || state === "cancelled";
}

export const EVENT_KINDS = [
  "submitted",
  "claimed",
  "heartbeat",
  "completed",
  "failed",
  "dead_lettered",
  "lease_expired",
  "redriven",
  "cancelled",
  "released",
  /** RUNNING -> QUEUED after a delay, attempt refunded (docs/api.md "Snooze and progress"). */
  "snoozed",
  /** A heartbeat reported progress; no state change (stored at most once a second per job). */
  "progress",
  /** A schedule submitted the job (docs/api.md "Schedules"); its SUBMITTED event follows. */
  "scheduled",
  /** WAITING -> QUEUED: the job's last dependency finished (docs/api.md "Workflows"). */
  "dependencies_met",
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** A job as readers see it: never a lease token or an idempotency key. */
export interface Job {
  id: string;
  queue: string;
  task: string;
  /** The job's group (docs/api.md "Groups"), fixed at submit; "" when it has none. */
  groupKey: string;
  /** Compact JSON text of the payload ("null" when none). */
  payloadJson: string;
  priority: number;
  state: JobState;
  attempts: number;
  maxAttempts: number;
  retryBaseDelayMs: number;
  scheduleTime: number;
  createTime: number;
  updateTime: number;
  finishTime: number | null;
  workerId: string | null;
  leaseExpireTime: number | null;
  deliveries: number;
  lastError: string | null;
  /** Compact JSON text of the result, set by Complete. */
  resultJson: string | null;
  /** Compact JSON text of the latest progress a heartbeat reported; null until one does. */
  progressJson: string | null;
  /** The W3C Trace Context the job carries (docs/api.md "Trace context"), fixed at submit; null when none. */
  traceContext: TraceContext | null;
  /** The jobs this one depends on (docs/api.md "Workflows"), as submitted, refs resolved to ids; empty when none. */
  dependsOn: readonly string[];
  /** Its dependencies by their current states; null when it has none. */
  dependencyCounts: DependencyCounts | null;
}

/** What a job waits for does to it when it ends DEAD or CANCELLED (docs/api.md "Workflows"). */
export const DEPENDENCY_POLICIES = ["wait", "cancel", "ignore"] as const;
export type DependencyPolicy = (typeof DEPENDENCY_POLICIES)[number];

/** A job's dependencies counted by their current states: completed (COMPLETED), failed (DEAD or CANCELLED); the rest pending. */
export interface DependencyCounts {
  total: number;
  completed: number;
  failed: number;
}

/** A job with the private fields the store keeps beside it. */
export interface StoredJob extends Job {
  /** SHA-256 of the current (or, after an expiry, the last) lease token. */
  leaseTokenHash: Uint8Array | null;
  /** The lease duration given at claim; Heartbeat without one extends by it. */
  leaseDurationMs: number | null;
  idempotencyKey: string | null;
  /** Fingerprint of the normalized submit request, for idempotent replays. */
  requestHash: string | null;
  /**
   * When the current lease last stored a HEARTBEAT event; null until its
   * first one. The state machine stores at most one per lease per
   * HEARTBEAT_EVENT_INTERVAL_MS (see heartbeat() there).
   */
  heartbeatEventTime: number | null;
  /**
   * When the job last stored a PROGRESS event; null until its first one.
   * Unlike heartbeatEventTime it belongs to the job, not the lease: at most
   * one per job per PROGRESS_EVENT_INTERVAL_MS (see heartbeat() in
   * state-machine.ts).
   */
  progressEventTime: number | null;
  /** What a dependency that ends DEAD or CANCELLED does to this job; null when it has no dependencies. */
  dependencyPolicy: DependencyPolicy | null;
  /** Whether some job depends on this one (set when the first such job is submitted, never cleared). */
  hasDependents: boolean;
}

export interface JobEvent {
  sequence: number;
  jobId: string;
  queue: string;
  /** The job's group_key ("" when none). */
  groupKey: string;
  kind: EventKind;
  fromState: JobState | null;
  toState: JobState;
  eventTime: number;
  workerId: string | null;
  /** The job's attempts after the transition. */
  attempt: number;
  message: string | null;
}

/** An event before the store has given it a sequence number. */
export type EventDraft = Omit<JobEvent, "sequence">;

export function publicJob(job: StoredJob): Job {
  const {
    leaseTokenHash: _h,
    leaseDurationMs: _d,
    idempotencyKey: _k,
    requestHash: _r,
    heartbeatEventTime: _b,
    progressEventTime: _p,
    dependencyPolicy: _dp,
    hasDependents: _hd,
    ...rest
  } = job;
  return rest;
}
