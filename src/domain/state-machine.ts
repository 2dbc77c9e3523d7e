/**
 * The job state machine: every transition of docs/api.md "Semantics" and
 * every refusal, in one place. Each function takes the job as stored and the
 * current time and returns the job as it must be stored next plus the events
 * that record the change; a store only persists what these return.
 */
import { backoffCeilingMs } from "./backoff.js";
import { QueueError } from "./errors.js";
import type { EventDraft, JobState, StoredJob } from "./job.js";
import { leaseTokenMatches } from "./lease-token.js";
import { BOUNDS, DEFAULTS } from "./request-bounds.js";

/**
 * What a transition returns. The transitions:
 *
 *   submit ──► QUEUED ──claim──► RUNNING ──complete──► COMPLETED
 *                ▲  │               │  ├──fail, budget left──► RETRY ──claim──► RUNNING
 *                │  │               │  └──lease expires, budget left──► RETRY (eligible at once)
 *                │  cancel          └──fail permanent / budget spent / expiry with budget spent──► DEAD
 *                │  ▼                                                                              │
 *                │ CANCELLED ◄──cancel── RETRY          (RUNNING ──release──► QUEUED/RETRY, attempt refunded)
 *                │                                                                                 │
 *                └──────────────────────────────── redrive ◄───────────────────────────────────────┘
 *
 *   RUNNING ──snooze──► QUEUED at now + delay, attempt refunded ("not now" is not a failure)
 *   RUNNING ──heartbeat with progress──► RUNNING, Job.progress replaced
 */
export interface Transition {
  job: StoredJob;
  /** The events to store (each gets a sequence and reaches ListJobEvents and WatchEvents). */
  events: EventDraft[];
  /**
   * What happened but is not stored: a heartbeat within
   * HEARTBEAT_EVENT_INTERVAL_MS of the lease's last stored one, a progress
   * report within PROGRESS_EVENT_INTERVAL_MS of the job's last stored one.
   * They are applied all the same (the lease extended, Job.progress
   * replaced); metrics count them, nothing else sees them.
   */
  unrecorded?: EventDraft[];
}

/**
 * The heartbeat policy: a lease stores its first HEARTBEAT event, then at
 * most one per minute, so a job heartbeating every few seconds for hours
 * does not make the event table the largest thing on disk. Every other
 * event (every state change) is always stored.
 */
export const HEARTBEAT_EVENT_INTERVAL_MS = 60 * 1000;

/**
 * The progress policy (docs/api.md "Snooze and progress"): a job stores at
 * most one PROGRESS event per second, whatever its leases, so a worker
 * reporting progress on every heartbeat of a fast loop cannot flood the
 * timeline; Job.progress always holds the latest value.
 */
export const PROGRESS_EVENT_INTERVAL_MS = 1000;

/** Backoff ceiling for retries (docs/api.md "Retries and backoff": min(base * 2^(attempts-1), 1h)). */
export const MAX_BACKOFF_MS = 60 * 60 * 1000;

/** Delay before the next attempt after the `attempts`-th one failed. */
export function retryBackoffMs(retryBaseDelayMs: number, attempts: number): number {
  return backoffCeilingMs(attempts - 1, { initialMs: retryBaseDelayMs, maxMs: MAX_BACKOFF_MS });
}

export function isEligible(job: StoredJob, now: number): boolean {
  return (job.state === "queued" || job.state === "retry") && job.scheduleTime <= now;
}

export function budgetLeft(job: StoredJob): boolean {
  return job.attempts < job.maxAttempts;
}

function event(
  job: StoredJob,
  from: JobState | null,
  kind: EventDraft["kind"],
  now: number,
  message: string | null = null,
  workerId: string | null = job.workerId,
): EventDraft {
  return {
    jobId: job.id,
    queue: job.queue,
    groupKey: job.groupKey,
    kind,
    fromState: from,
    toState: job.state,
    eventTime: now,
    workerId,
    attempt: job.attempts,
    message,
  };
}

export function submitted(job: StoredJob): Transition {
  return { job, events: [event(job, null, "submitted", job.createTime)] };
}

/** QUEUED/RETRY (eligible) -> RUNNING under a new lease. Attempts are counted here. */
export function claim(
  job: StoredJob,
  now: number,
  lease: { workerId: string; leaseDurationMs: number; tokenHash: Uint8Array },
): Transition {
  if (!isEligible(job, now)) {
    throw new Error(`invariant: job ${job.id} is not eligible for claim`);
  }
  const next: StoredJob = {
    ...job,
    state: "running",
    attempts: job.attempts + 1,
    deliveries: job.deliveries + 1,
    workerId: lease.workerId,
    leaseExpireTime: now + lease.leaseDurationMs,
    leaseDurationMs: lease.leaseDurationMs,
    leaseTokenHash: lease.tokenHash,
    heartbeatEventTime: null,
    updateTime: now,
  };
  return { job: next, events: [event(next, job.state, "claimed", now)] };
}

/**
 * The fence of every worker acknowledgement: the job must be RUNNING, the
 * token must be the current one, and the lease must still be active
 * (now < lease_expire_time). A token that matches the lease which was lost
 * to expiry (even after the sweep recovered it) is LEASE_EXPIRED, so the
 * worker learns why; anything else is LEASE_REJECTED.
 */
export function assertLeaseHeld(job: StoredJob, token: string, now: number): void {
  const matches = leaseTokenMatches(token, job.leaseTokenHash);
  if (matches && job.state === "cancelled") {
    throw new QueueError("LEASE_REJECTED", `job ${job.id} was cancelled while running; its lease is revoked`, {
      jobId: job.id,
      state: job.state,
    });
  }
  if (!matches) {
    throw new QueueError(
      "LEASE_REJECTED",
      job.state === "running"
        ? `lease_token does not match the current lease of job ${job.id}`
        : `job ${job.id} is not running (state ${job.state}); its lease is no longer held`,
      { jobId: job.id, state: job.state },
    );
  }
  if (job.state !== "running" || job.leaseExpireTime === null || now >= job.leaseExpireTime) {
    throw new QueueError("LEASE_EXPIRED", `the lease on job ${job.id} expired; it may be run again`, {
      jobId: job.id,
      state: job.state,
    });
  }
}

/**
 * Extends an active lease, and with `progressJson` (compact JSON text)
 * replaces Job.progress. Its HEARTBEAT event is stored when it is the
 * lease's first, or when HEARTBEAT_EVENT_INTERVAL_MS have passed since the
 * last stored one; its PROGRESS event (the progress as its message) when
 * it is the job's first, or when PROGRESS_EVENT_INTERVAL_MS have passed
 * since the job's last stored one. Either one not stored is `unrecorded`
 * (see Transition).
 */
export function heartbeat(job: StoredJob, token: string, now: number, leaseDurationMs?: number, progressJson?: string): Transition {
  assertLeaseHeld(job, token, now);
  const duration = leaseDurationMs ?? job.leaseDurationMs ?? DEFAULTS.leaseDurationMs;
  const beatStored = job.heartbeatEventTime === null || now - job.heartbeatEventTime >= HEARTBEAT_EVENT_INTERVAL_MS;
  const reported = progressJson !== undefined;
  const progressStored = reported && (job.progressEventTime === null || now - job.progressEventTime >= PROGRESS_EVENT_INTERVAL_MS);
  const next: StoredJob = {
    ...job,
    leaseExpireTime: now + duration,
    leaseDurationMs: duration,
    updateTime: now,
    heartbeatEventTime: beatStored ? now : job.heartbeatEventTime,
    progressJson: reported ? progressJson : job.progressJson,
    progressEventTime: progressStored ? now : job.progressEventTime,
  };
  const events: EventDraft[] = [];
  const unrecorded: EventDraft[] = [];
  (beatStored ? events : unrecorded).push(event(next, "running", "heartbeat", now));
  if (reported) (progressStored ? events : unrecorded).push(event(next, "running", "progress", now, progressJson));
  return unrecorded.length === 0 ? { job: next, events } : { job: next, events, unrecorded };
}

function finished(job: StoredJob, state: JobState, now: number, patch: Partial<StoredJob> = {}): StoredJob {
  return {
    ...job,
    ...patch,
    state,
    updateTime: now,
    finishTime: now,
    workerId: null,
    leaseExpireTime: null,
    leaseTokenHash: null,
  };
}

export function complete(job: StoredJob, token: string, now: number, resultJson: string | null): Transition {
  assertLeaseHeld(job, token, now);
  const next = finished(job, "completed", now, { resultJson });
  return { job: next, events: [event(next, "running", "completed", now, null, job.workerId)] };
}

/**
 * RUNNING -> RETRY (budget left, not permanent; eligible after backoff or
 * retryDelayMs) or RUNNING -> DEAD.
 */
export function fail(
  job: StoredJob,
  token: string,
  now: number,
  failure: { error: string; permanent: boolean; retryDelayMs?: number },
): Transition {
  assertLeaseHeld(job, token, now);
  const lastError = failure.error === "" ? null : failure.error;
  if (!failure.permanent && budgetLeft(job)) {
    const delay = failure.retryDelayMs ?? retryBackoffMs(job.retryBaseDelayMs, job.attempts);
    const next: StoredJob = {
      ...job,
      state: "retry",
      scheduleTime: now + delay,
      updateTime: now,
      workerId: null,
      leaseExpireTime: null,
      leaseTokenHash: null,
      lastError,
    };
    return { job: next, events: [event(next, "running", "failed", now, failure.error || null, job.workerId)] };
  }
  const next = finished(job, "dead", now, { lastError });
  return { job: next, events: [event(next, "running", "dead_lettered", now, failure.error || null, job.workerId)] };
}

/**
 * A RUNNING job whose lease has expired (now >= lease_expire_time): budget
 * left -> RETRY, eligible at once; budget spent -> DEAD. The lease token hash
 * is kept so the late worker is told LEASE_EXPIRED rather than REJECTED.
 */
export function expireLease(job: StoredJob, now: number): Transition {
  if (job.state !== "running" || job.leaseExpireTime === null || now < job.leaseExpireTime) {
    throw new Error(`invariant: job ${job.id} has no expired lease`);
  }
  const message = `lease held by ${job.workerId ?? "unknown worker"} expired`;
  if (budgetLeft(job)) {
    const next: StoredJob = {
      ...job,
      state: "retry",
      scheduleTime: now,
      updateTime: now,
      workerId: null,
      leaseExpireTime: null,
      lastError: message,
    };
    return { job: next, events: [event(next, "running", "lease_expired", now, message, job.workerId)] };
  }
  const next: StoredJob = { ...finished(job, "dead", now, { lastError: message }), leaseTokenHash: job.leaseTokenHash };
  return {
    job: next,
    events: [
      event(next, "running", "lease_expired", now, message, job.workerId),
      event(next, "running", "dead_lettered", now, "attempt budget spent", job.workerId),
    ],
  };
}

/**
 * RUNNING -> QUEUED or RETRY: a lease given back before its job was started
 * (a worker shutting down, or a stream that ended with the lease unsent).
 * The claim's attempt is refunded, so a release never spends the budget;
 * the job is eligible again at once. `deliveries` keeps counting the claim.
 */
export function release(job: StoredJob, token: string, now: number): Transition {
  assertLeaseHeld(job, token, now);
  const attempts = job.attempts - 1;
  const next: StoredJob = {
    ...job,
    state: attempts > 0 ? "retry" : "queued",
    attempts,
    scheduleTime: now,
    updateTime: now,
    workerId: null,
    leaseExpireTime: null,
    leaseTokenHash: null,
  };
  return { job: next, events: [event(next, "running", "released", now, null, job.workerId)] };
}

/**
 * RUNNING -> QUEUED, eligible again at now + delayMs: the worker says "not
 * now" (a rate-limited partner, a resource not ready yet). The claim's
 * attempt is refunded, so snoozing never spends the budget, and the job is
 * always QUEUED (unlike release, which returns a retried job to RETRY):
 * nothing failed. Job.progress and last_error stay; `deliveries` keeps
 * counting the claim. The delay is bounded like a submit's `delay`
 * (BOUNDS.snoozeDelayMs); the service refuses anything else first, so a
 * delay out of bounds here is an invariant broken by the caller.
 */
export function snooze(job: StoredJob, token: string, now: number, delayMs: number): Transition {
  const [min, max] = BOUNDS.snoozeDelayMs;
  if (!Number.isInteger(delayMs) || delayMs < min || delayMs > max) {
    throw new Error(`invariant: snooze delay ${delayMs} ms is outside ${min}..${max} ms`);
  }
  assertLeaseHeld(job, token, now);
  const next: StoredJob = {
    ...job,
    state: "queued",
    attempts: job.attempts - 1,
    scheduleTime: now + delayMs,
    updateTime: now,
    workerId: null,
    leaseExpireTime: null,
    leaseTokenHash: null,
  };
  return { job: next, events: [event(next, "running", "snoozed", now, null, job.workerId)] };
}

/** DEAD -> QUEUED with a fresh attempt budget, eligible now. */
export function redrive(job: StoredJob, now: number): Transition {
  if (job.state !== "dead") {
    throw new QueueError("NOT_DEAD", `job ${job.id} is ${job.state}; only dead jobs can be redriven`, {
      jobId: job.id,
      state: job.state,
    });
  }
  const next: StoredJob = {
    ...job,
    state: "queued",
    attempts: 0,
    scheduleTime: now,
    updateTime: now,
    finishTime: null,
    workerId: null,
    leaseExpireTime: null,
    leaseTokenHash: null,
  };
  return { job: next, events: [event(next, "dead", "redriven", now)] };
}

/**
 * WAITING -> QUEUED (docs/api.md "Workflows"): the job's dependencies are
 * met; it is eligible by its own schedule_time.
 */
export function dependenciesMet(job: StoredJob, now: number): Transition {
  if (job.state !== "waiting") throw new Error(`invariant: job ${job.id} is ${job.state}, not waiting`);
  const next: StoredJob = { ...job, state: "queued", updateTime: now };
  return { job: next, events: [event(next, "waiting", "dependencies_met", now)] };
}

/**
 * QUEUED, WAITING or RETRY -> CANCELLED; with `includeRunning`, RUNNING -> CANCELLED
 * too (docs/api.md "Cancelling a running job"): the lease is revoked at
 * once, its token hash kept so that the worker holding it is told the job
 * was cancelled (assertLeaseHeld) rather than that its lease expired.
 */
export function cancel(job: StoredJob, now: number, reason: string, includeRunning = false): Transition {
  if (job.state === "running" && includeRunning) {
    const next: StoredJob = { ...finished(job, "cancelled", now), leaseTokenHash: job.leaseTokenHash };
    return { job: next, events: [event(next, "running", "cancelled", now, reason || null, job.workerId)] };
  }
  if (job.state !== "queued" && job.state !== "retry" && job.state !== "waiting") {
    const what =
      job.state === "running"
        ? "a running job is cancelled only with include_running"
        : "only queued, waiting, retrying or (with include_running) running jobs can be cancelled";
    throw new QueueError("NOT_CANCELLABLE", `job ${job.id} is ${job.state}; ${what}`, {
      jobId: job.id,
      state: job.state,
    });
  }
  const next = finished(job, "cancelled", now);
  return { job: next, events: [event(next, job.state, "cancelled", now, reason || null)] };
}
