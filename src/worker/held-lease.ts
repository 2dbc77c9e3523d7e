/**
 * One lease the worker holds, from the moment it arrives until the worker
 * is done with it: its state (HeldLease's comment draws the machine), its
 * heartbeats with the handler's progress, and its local deadline on this
 * machine's monotonic clock, which errs early so the handler is told before
 * another worker can get the job; the server's refusal ends it too.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { durationFromMs, timestampDate, timestampFromDate, type Value } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import type { DependencyResult, Job, Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { AckBatcher } from "./ack-batcher.js";
import { JobCancelledError, LeaseLostError, type LeaseLostReason } from "./errors.js";

export type LeaseState = "waiting" | "running" | "finishing" | "acknowledged" | "released" | "dropped" | "lost" | "cancelled";

/** The states the worker is done with. */
const TERMINAL: ReadonlySet<LeaseState> = new Set(["acknowledged", "released", "dropped", "lost", "cancelled"]);

export interface HeldLeaseOptions {
  acks: AckBatcher;
  leaseDurationMs: number;
  heartbeatIntervalMs: number;
  onHeartbeat(job: Job): void;
  onHeartbeatError(error: ConnectError): void;
  onLost(error: LeaseLostError): void;
  /** The lease reached a terminal state. */
  onDone(): void;
}

/** After a heartbeat fails for a passing reason (network, unavailable), try again this soon. */
const HEARTBEAT_RETRY_MS = 1000;

/** A progress report is sent with a heartbeat at most this long after it was made. */
export const PROGRESS_DELAY_MS = 1000;

/** The lease-loss reason of a refused acknowledgement, or undefined when the refusal is not about the lease. */
export function leaseLostReason(err: ConnectError): LeaseLostReason | undefined {
  if (err.code === Code.NotFound) return "JOB_NOT_FOUND";
  if (err.code !== Code.Aborted) return undefined;
  const reason = err.findDetails(ErrorInfoSchema).find((d) => d.domain === "leasequeue")?.reason;
  return reason === "LEASE_EXPIRED" ? "LEASE_EXPIRED" : "LEASE_REJECTED";
}

/**
 * A held lease, in exactly one state at a time:
 *
 *     waiting ──start()──> running ──finish()──> finishing ──settle()──> acknowledged | released | dropped
 *        │                    │                      │
 *        └────────────────────┴──────────────────────┴──markLost()──> lost
 *        └────────────────────┴──────────────────────┴──markCancelled()──> cancelled
 *
 * - waiting: arrived, its handler has not started (no free slot yet).
 * - running: its handler runs.
 * - finishing: Complete, Fail, Snooze or Release is on its way (batched,
 *   sent, or being sent again after a passing failure).
 * - acknowledged / released: the server took the Complete, Fail or Snooze /
 *   the Release.
 * - dropped: the worker stopped trying to acknowledge (a refusal that is not
 *   about the lease, or close() past its grace); the lease runs out on the
 *   server.
 * - lost: the server refused the lease, or the local deadline passed. The
 *   handler's signal fires; nothing is acknowledged.
 * - cancelled: the server said the job was cancelled while held (Work's
 *   `cancelled_job_ids`, StreamClaims' `cancelled_job_id`). The handler's
 *   signal fires with a JobCancelledError; nothing is acknowledged.
 *
 * Heartbeats run on a timer in every live state (a Complete may need sending
 * again for a while) and travel as AckHeartbeat acknowledgements in the
 * worker's batches. Progress (docs/api.md "Snooze and progress") rides on
 * them: the handler's latest report goes with the next heartbeat, which a
 * report brings forward to at most PROGRESS_DELAY_MS away, so a handler
 * reporting in a tight loop sends one heartbeat a second with the latest
 * value (the server stores at most one PROGRESS event a second per job
 * anyway). The local deadline runs on this machine's monotonic clock: a lease
 * is assumed to last `leaseDurationMs` from its arrival, and from the moment
 * a successful heartbeat was queued. That errs early, so the handler is told
 * before another worker can get the job. The server stays the authority: its
 * refusal (`aborted` LEASE_REJECTED / LEASE_EXPIRED, `not_found`) also ends
 * the lease here, except while finishing, when our own Complete may be what
 * ended it.
 */
export class HeldLease {
  readonly job: Job;
  readonly token: string;
  /** The job's direct dependencies' outcomes (the first 100), and whether there are more. */
  readonly dependencies: readonly DependencyResult[];
  readonly dependenciesTruncated: boolean;
  readonly #opts: HeldLeaseOptions;
  readonly #controller = new AbortController();
  #state: LeaseState = "waiting";
  #expiresAt: number;
  #leaseExpireTime: Date;
  #beatTimer: NodeJS.Timeout | undefined;
  #expiryTimer: NodeJS.Timeout | undefined;
  #beating: Promise<void> | undefined;
  #lost: LeaseLostError | undefined;
  /** Progress reported and not yet carried by a heartbeat the server took. */
  #progress: Value | undefined;
  /** The latest progress a heartbeat the server took carried. */
  #sentProgress: Value | undefined;
  /** When the scheduled heartbeat runs (performance.now()). */
  #beatAt = Infinity;

  constructor(lease: Lease, options: HeldLeaseOptions) {
    if (lease.job === undefined) throw new TypeError("lease without a job");
    this.job = lease.job;
    this.token = lease.leaseToken;
    this.dependencies = lease.dependencies;
    this.dependenciesTruncated = lease.dependenciesTruncated;
    this.#opts = options;
    this.#expiresAt = performance.now() + options.leaseDurationMs;
    this.#leaseExpireTime =
      lease.job.leaseExpireTime !== undefined ? timestampDate(lease.job.leaseExpireTime) : new Date(Date.now() + options.leaseDurationMs);
    this.#armExpiry();
    this.#scheduleBeat(options.heartbeatIntervalMs);
  }

  get state(): LeaseState {
    return this.#state;
  }

  /** Aborted when the lease is lost (a LeaseLostError) or the worker gave up on the job at close (a WorkerClosedError). */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The lease's expiry as the server last reported it. */
  get leaseExpireTime(): Date {
    return this.#leaseExpireTime;
  }

  /** The local deadline has passed (no heartbeat succeeded for a lease duration). */
  get expiredLocally(): boolean {
    return performance.now() >= this.#expiresAt;
  }

  /** waiting -> running: its handler starts. */
  start(): void {
    this.#move(["waiting"], "running");
  }

  /** waiting | running -> finishing: Complete, Fail or Release is on its way. */
  finish(): void {
    this.#move(["waiting", "running"], "finishing");
  }

  /** finishing -> acknowledged | released | dropped: the worker is done with the lease. */
  settle(state: "acknowledged" | "released" | "dropped"): void {
    if (TERMINAL.has(this.#state)) return;
    this.#state = state;
    this.#stopTimers();
    this.#opts.onDone();
  }

  /**
   * Extends the lease now (joining a heartbeat already on its way). Rejects
   * with LeaseLostError when the lease is gone, with the ConnectError when
   * it failed for another reason (the timer keeps trying).
   */
  heartbeat(): Promise<void> {
    if (this.#lost !== undefined) return Promise.reject(this.#lost);
    if (TERMINAL.has(this.#state)) return Promise.reject(new Error(`the lease on job ${this.job.id} is no longer held (${this.#state})`));
    this.#beating ??= this.#beat().finally(() => (this.#beating = undefined));
    return this.#beating;
  }

  /**
   * Sends `progress` (a Value, validated by the caller) with the next
   * heartbeat, brought forward to at most PROGRESS_DELAY_MS from now; a
   * later report replaces one not sent yet. Ignored unless the handler
   * runs (a report after the handler returned, or after the lease was lost,
   * has nobody to inform).
   */
  reportProgress(progress: Value): void {
    if (this.#state !== "running") return;
    this.#progress = progress;
    const due = performance.now() + PROGRESS_DELAY_MS;
    if (this.#beating === undefined && this.#beatAt > due) this.#scheduleBeat(PROGRESS_DELAY_MS);
  }

  /**
   * Sends progress not sent yet with a heartbeat now, ahead of the
   * acknowledgement the caller queues next: both share a batch and apply in
   * order, so a job completes or snoozes with its last progress stored.
   */
  flushProgress(): void {
    if (this.#progress !== undefined && this.#beating === undefined) void this.heartbeat().catch(() => undefined);
  }

  /** Aborts the handler's signal without giving up the lease (close() still has to Fail the job). */
  abortHandler(reason: Error): void {
    this.#controller.abort(reason);
  }

  /**
   * The server cancelled the job while this lease held it: stop, abort the
   * handler with a JobCancelledError, acknowledge nothing. Answers false
   * when the worker was already done with the lease.
   */
  markCancelled(): boolean {
    if (TERMINAL.has(this.#state)) return false;
    this.#state = "cancelled";
    this.#stopTimers();
    this.#controller.abort(new JobCancelledError(this.job.id));
    this.#opts.onDone();
    return true;
  }

  /** The lease is gone (a server refusal, or the local deadline): stop, and abort the handler. */
  markLost(reason: LeaseLostReason, detail: string): LeaseLostError {
    if (this.#lost !== undefined) return this.#lost;
    this.#lost = new LeaseLostError(this.job.id, reason, detail);
    this.#state = "lost";
    this.#stopTimers();
    this.#controller.abort(this.#lost);
    this.#opts.onLost(this.#lost);
    this.#opts.onDone();
    return this.#lost;
  }

  #move(from: LeaseState[], to: LeaseState): void {
    if (!from.includes(this.#state)) throw new Error(`invariant: lease on job ${this.job.id} is ${this.#state}, not ${from.join(" or ")}`);
    this.#state = to;
  }

  async #beat(): Promise<void> {
    const { acks, leaseDurationMs, heartbeatIntervalMs } = this.#opts;
    clearTimeout(this.#beatTimer);
    this.#beatAt = Infinity;
    const queuedAt = performance.now();
    const progress = this.#progress;
    this.#progress = undefined;
    const answer = await acks.send({
      jobId: this.job.id,
      leaseToken: this.token,
      outcome: { case: "heartbeat", value: { leaseDuration: durationFromMs(leaseDurationMs), progress } },
    });
    if (this.#lost !== undefined) throw this.#lost;
    const err = answer.error;
    if (err === undefined) {
      if (TERMINAL.has(this.#state)) return;
      // Counted from when it was queued, not answered: errs early.
      this.#expiresAt = queuedAt + leaseDurationMs;
      this.#armExpiry();
      if (answer.leaseExpireTime !== undefined) this.#leaseExpireTime = answer.leaseExpireTime;
      if (progress !== undefined) this.#sentProgress = progress;
      // A report made while this one was on its way goes soon, not a whole interval later.
      this.#scheduleBeat(this.#progress !== undefined ? Math.min(heartbeatIntervalMs, PROGRESS_DELAY_MS) : heartbeatIntervalMs);
      this.#opts.onHeartbeat({
        ...this.job,
        leaseExpireTime: timestampFromDate(this.#leaseExpireTime),
        progress: this.#sentProgress ?? this.job.progress,
      });
      return;
    }
    // Not taken: the report goes with the next attempt, unless a newer one replaced it.
    this.#progress ??= progress;
    if (TERMINAL.has(this.#state)) throw err;
    const reason = leaseLostReason(err);
    if (reason !== undefined && this.#state === "finishing") {
      // Our own Complete/Fail may have ended the lease; its answer decides.
      this.#stopTimers();
      throw err;
    }
    if (reason !== undefined) throw this.markLost(reason, `the server refused the heartbeat: ${err.rawMessage}`);
    this.#scheduleBeat(Math.min(heartbeatIntervalMs, HEARTBEAT_RETRY_MS));
    this.#opts.onHeartbeatError(err);
    throw err;
  }

  #scheduleBeat(ms: number): void {
    clearTimeout(this.#beatTimer);
    this.#beatAt = Infinity;
    if (TERMINAL.has(this.#state)) return;
    this.#beatAt = performance.now() + ms;
    this.#beatTimer = setTimeout(() => void this.heartbeat().catch(() => undefined), ms);
    this.#beatTimer.unref();
  }

  #armExpiry(): void {
    clearTimeout(this.#expiryTimer);
    const ms = Math.max(0, this.#expiresAt - performance.now());
    this.#expiryTimer = setTimeout(() => {
      if (this.#state === "finishing") {
        // The acknowledgement's own retries stop at the deadline (expiredLocally); heartbeating on is pointless.
        clearTimeout(this.#beatTimer);
        return;
      }
      this.markLost("EXPIRED_LOCALLY", `no heartbeat succeeded within the lease duration of ${this.#opts.leaseDurationMs} ms`);
    }, ms);
    this.#expiryTimer.unref();
  }

  #stopTimers(): void {
    clearTimeout(this.#beatTimer);
    clearTimeout(this.#expiryTimer);
  }
}
