/**
 * The errors a worker's handler throws to steer Fail or Snooze, and the
 * reasons its AbortSignal carries when the SDK takes the job away.
 */
import { BOUNDS } from "../domain/request-bounds.js";

/**
 * Throw from a handler to dead-letter the job now, whatever attempts are
 * left (Fail with `permanent: true`). For input that can never succeed: a
 * malformed payload, a deleted account.
 */
export class PermanentJobError extends Error {
  override name = "PermanentJobError";
}

export interface RetryJobErrorOptions extends ErrorOptions {
  /**
   * Retry after this many milliseconds instead of the job's exponential
   * backoff (Fail's `retry_delay`, 0..30 days). Required: without an
   * override, throw any other error.
   */
  retryDelayMs: number;
}

/**
 * Throw from a handler to fail this attempt and set when the retry runs,
 * e.g. from a rate limiter's Retry-After. The job still dead-letters when
 * its attempts are spent.
 */
export class RetryJobError extends Error {
  override name = "RetryJobError";
  readonly retryDelayMs: number;
  constructor(message: string, options: RetryJobErrorOptions) {
    super(message, options);
    if (!Number.isFinite(options.retryDelayMs) || options.retryDelayMs < 0) {
      throw new RangeError(`RetryJobError: retryDelayMs must be a finite number >= 0, got ${options.retryDelayMs}`);
    }
    this.retryDelayMs = options.retryDelayMs;
  }
}

/**
 * Throw from a handler (or call `ctx.snooze(delayMs)`, which throws one) to
 * put the job back for later without failing it: the Snooze of docs/api.md
 * "Snooze and progress". The job is QUEUED again, eligible after `delayMs`,
 * and the attempt is refunded, so a job can wait for a rate limit or a
 * resource as often as it needs without spending its budget. For "not now",
 * not for errors: those belong to RetryJobError.
 */
export class SnoozeJob extends Error {
  override name = "SnoozeJob";
  /** Milliseconds until the job is eligible again: 0..30 days (2 592 000 000). */
  readonly delayMs: number;
  constructor(delayMs: number, options?: ErrorOptions) {
    const [min, max] = BOUNDS.snoozeDelayMs;
    if (!Number.isFinite(delayMs) || delayMs < min || delayMs > max) {
      throw new RangeError(`SnoozeJob: delayMs must be a finite number in ${min}..${max} (up to 30 days), got ${delayMs}`);
    }
    super(`snoozed for ${delayMs} ms`, options);
    this.delayMs = Math.round(delayMs);
  }
}

/** Why a lease was lost. */
export type LeaseLostReason =
  /** The server refused the token: the job was completed, failed, cancelled or re-leased. */
  | "LEASE_REJECTED"
  /** The server says the lease ran out before the heartbeat arrived. */
  | "LEASE_EXPIRED"
  /** The job no longer exists (pruned). */
  | "JOB_NOT_FOUND"
  /** No heartbeat succeeded before the lease's duration ran out on this machine's clock. */
  | "EXPIRED_LOCALLY";

/**
 * The reason of a handler's `signal` when the worker no longer holds the
 * lease. Another worker may already be running the job: stop, and leave
 * side effects to the lease holder. The SDK neither completes nor fails the
 * job after this; whatever the handler returns is discarded.
 */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
  constructor(
    readonly jobId: string,
    readonly reason: LeaseLostReason,
    detail: string,
  ) {
    super(`lease on job ${jobId} lost (${reason}): ${detail}`);
  }
}

/**
 * The reason of a handler's `signal` when the job was cancelled while it ran
 * (CancelRequest.include_running; docs/api.md "Cancelling a running job"):
 * the job is CANCELLED on the server and its lease revoked. Stop; the SDK
 * sends no outcome for it, and whatever the handler returns is discarded.
 */
export class JobCancelledError extends Error {
  override name = "JobCancelledError";
  constructor(readonly jobId: string) {
    super(`job ${jobId} was cancelled while it ran`);
  }
}

/**
 * The reason of a handler's `signal` when `close()` gave up waiting for it.
 * The SDK has failed the job with `retry_delay` 0, so it is eligible again
 * at once.
 */
export class WorkerClosedError extends Error {
  override name = "WorkerClosedError";
  constructor(
    readonly jobId: string,
    shutdownTimeoutMs: number,
  ) {
    super(`worker closed: job ${jobId} did not finish within the shutdown timeout of ${shutdownTimeoutMs} ms`);
  }
}
