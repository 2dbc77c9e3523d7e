/**
 * One lease the worker holds, from the moment it arrives on the stream until
 * it is acknowledged (Complete/Fail) or lost: heartbeats on a timer, the
 * local expiry deadline, and the AbortController behind the handler's
 * signal.
 *
 * The local deadline runs on this machine's monotonic clock: a lease is
 * assumed to last `leaseDurationMs` from its arrival, and from the moment a
 * successful heartbeat was *sent*. That errs early (the server extended the
 * lease later than we sent), so the handler is told before another worker
 * can get the job. The server stays the authority: its refusal
 * (`aborted` LEASE_REJECTED / LEASE_EXPIRED) also ends the lease here.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import type { Job, Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { LeaseQueueClient } from "./client.js";
import { LeaseLostError, type LeaseLostReason } from "./errors.js";

export interface HeldLeaseOptions {
  client: LeaseQueueClient;
  leaseDurationMs: number;
  heartbeatIntervalMs: number;
  onHeartbeat(job: Job): void;
  onHeartbeatError(error: ConnectError): void;
  onLost(error: LeaseLostError): void;
}

/** After a heartbeat fails for a passing reason (network, unavailable), try again this soon. */
const HEARTBEAT_RETRY_MS = 1000;

/** The lease-loss reason of a refused Heartbeat/Complete/Fail, or undefined when the refusal is not about the lease. */
export function leaseLostReason(err: ConnectError): LeaseLostReason | undefined {
  if (err.code === Code.NotFound) return "JOB_NOT_FOUND";
  if (err.code !== Code.Aborted) return undefined;
  const reason = err.findDetails(ErrorInfoSchema).find((d) => d.domain === "leasequeue")?.reason;
  return reason === "LEASE_EXPIRED" ? "LEASE_EXPIRED" : "LEASE_REJECTED";
}

export class HeldLease {
  readonly job: Job;
  readonly token: string;
  readonly #opts: HeldLeaseOptions;
  readonly #controller = new AbortController();
  #expiresAt: number;
  #leaseExpireTime: Date;
  #beatTimer: NodeJS.Timeout | undefined;
  #expiryTimer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #released = false;
  #acknowledging = false;
  #expiredLocally = false;
  #lost: LeaseLostError | undefined;

  constructor(lease: Lease, options: HeldLeaseOptions) {
    if (lease.job === undefined) throw new TypeError("lease without a job");
    this.job = lease.job;
    this.token = lease.leaseToken;
    this.#opts = options;
    this.#expiresAt = performance.now() + options.leaseDurationMs;
    this.#leaseExpireTime =
      lease.job.leaseExpireTime !== undefined
        ? timestampDate(lease.job.leaseExpireTime)
        : new Date(Date.now() + options.leaseDurationMs);
    this.#armExpiry();
    this.#scheduleBeat(options.heartbeatIntervalMs);
  }

  /** Aborted when the lease is lost (a LeaseLostError) or the worker gave up on the job at close (a WorkerClosedError). */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The lease's expiry as the server last reported it. */
  get leaseExpireTime(): Date {
    return this.#leaseExpireTime;
  }

  /** Set once the lease is known lost. */
  get lost(): LeaseLostError | undefined {
    return this.#lost;
  }

  /** True while the worker still holds the lease (not acknowledged, not lost). */
  get held(): boolean {
    return !this.#released && this.#lost === undefined;
  }

  /**
   * Extends the lease now (joining a heartbeat already in flight). Rejects
   * with LeaseLostError when the lease is gone, with the ConnectError when
   * the call failed for another reason (the timer keeps trying).
   */
  heartbeat(): Promise<void> {
    if (this.#lost !== undefined) return Promise.reject(this.#lost);
    if (this.#released) return Promise.reject(new Error(`the lease on job ${this.job.id} was already released`));
    this.#inFlight ??= this.#beat().finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }

  /** Aborts the handler's signal without giving up the lease (close() still has to Fail the job). */
  abortHandler(reason: Error): void {
    this.#controller.abort(reason);
  }

  /**
   * Complete or Fail is on its way. Heartbeats go on (an acknowledgement may
   * be retried), but from now on the acknowledgement's answer decides whether
   * the lease was lost: a heartbeat refused because our own Complete just
   * committed is no loss.
   */
  beginAcknowledgement(): void {
    this.#acknowledging = true;
  }

  /** The local deadline passed while acknowledging; stop retrying. */
  get expiredLocally(): boolean {
    return this.#expiredLocally || performance.now() >= this.#expiresAt;
  }

  /** The lease was acknowledged: stop heartbeating. */
  release(): void {
    this.#released = true;
    this.#stopTimers();
  }

  /** The lease is gone (a server refusal, or the local deadline): stop, and abort the handler. */
  markLost(reason: LeaseLostReason, detail: string): LeaseLostError {
    if (this.#lost !== undefined) return this.#lost;
    this.#lost = new LeaseLostError(this.job.id, reason, detail);
    this.#stopTimers();
    if (!this.#released) this.#controller.abort(this.#lost);
    this.#opts.onLost(this.#lost);
    return this.#lost;
  }

  async #beat(): Promise<void> {
    const { client, leaseDurationMs, heartbeatIntervalMs } = this.#opts;
    clearTimeout(this.#beatTimer);
    const sentAt = performance.now();
    try {
      const res = await client.heartbeat(
        { jobId: this.job.id, leaseToken: this.token, leaseDuration: durationFromMs(leaseDurationMs) },
        { timeoutMs: Math.max(1000, heartbeatIntervalMs) },
      );
      if (!this.held) return;
      this.#expiresAt = sentAt + leaseDurationMs;
      this.#armExpiry();
      if (res.job?.leaseExpireTime !== undefined) this.#leaseExpireTime = timestampDate(res.job.leaseExpireTime);
      this.#scheduleBeat(heartbeatIntervalMs);
      if (res.job !== undefined) this.#opts.onHeartbeat(res.job);
    } catch (e) {
      if (this.#lost !== undefined) throw this.#lost;
      const err = ConnectError.from(e);
      if (this.#released) throw err;
      const reason = leaseLostReason(err);
      if (reason !== undefined && this.#acknowledging) {
        this.#stopTimers();
        throw err;
      }
      if (reason !== undefined) throw this.markLost(reason, `the server refused the heartbeat: ${err.rawMessage}`);
      this.#scheduleBeat(Math.min(heartbeatIntervalMs, HEARTBEAT_RETRY_MS));
      this.#opts.onHeartbeatError(err);
      throw err;
    }
  }

  #scheduleBeat(ms: number): void {
    clearTimeout(this.#beatTimer);
    if (!this.held) return;
    this.#beatTimer = setTimeout(() => this.heartbeat().catch(() => undefined), ms);
    this.#beatTimer.unref();
  }

  #armExpiry(): void {
    clearTimeout(this.#expiryTimer);
    const ms = Math.max(0, this.#expiresAt - performance.now());
    this.#expiryTimer = setTimeout(() => {
      if (this.#acknowledging) {
        this.#expiredLocally = true;
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
