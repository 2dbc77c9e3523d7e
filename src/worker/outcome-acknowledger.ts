/**
 * Sending an attempt's Outcome until the server has taken it: Complete,
 * Fail, Snooze or Release go in the next batch of acknowledgements, passing
 * failures are retried while the lease lasts, and the accepted outcome is
 * reported as an event with the job as it left it.
 */
import { timestampFromMs, type Value } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { backoffCeilingMs } from "../domain/backoff.js";
import { JobState, type Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ACK_ANSWER_TIMEOUT_MS, type AckBatcher } from "./ack-batcher.js";
import { ackOutcome, resultRefused, type Outcome } from "./attempt-outcome.js";
import { pause } from "./backoff.js";
import type { LeaseQueueClient } from "./client.js";
import { leaseLostReason, type HeldLease } from "./held-lease.js";
import { jsonToValue } from "./json-values.js";
import type { ReportEvent } from "./worker-events.js";

/**
 * Failures of Complete/Fail/Release worth retrying while the lease lasts.
 * `canceled` is among them: connect-node reports a connection reset under
 * an HTTP/2 call as "stream closed with error code CANCEL", and giving up
 * there would leave a finished job to expire. The SDK's own cancellation
 * (close() past its grace) is told apart by the cutoff signal. A Work
 * stream that broke answers its unanswered acknowledgements `unavailable`.
 */
const TRANSIENT: ReadonlySet<Code> = new Set([
  Code.Canceled,
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Internal,
  Code.Unknown,
]);

const RPC_OF = { complete: "Complete", release: "Release", fail: "Fail", snooze: "Snooze" } as const;

/** Waits between sends of an outcome after a passing failure: 100 ms doubling to 2 s. */
const ACK_RETRY_BACKOFF = { initialMs: 100, maxMs: 2000 };

export interface OutcomeAcknowledgerOptions {
  acks: AckBatcher;
  /** Reads the stored job when an earlier attempt may have been applied. */
  client: LeaseQueueClient;
  /** Aborted late in close(): stops sending and retrying. */
  cutoff: AbortSignal;
  onEvent: ReportEvent;
}

export class OutcomeAcknowledger {
  readonly #acks: AckBatcher;
  readonly #client: LeaseQueueClient;
  readonly #cutoff: AbortSignal;
  readonly #onEvent: ReportEvent;

  constructor(options: OutcomeAcknowledgerOptions) {
    this.#acks = options.acks;
    this.#client = options.client;
    this.#cutoff = options.cutoff;
    this.#onEvent = options.onEvent;
  }

  /**
   * Sends Complete, Fail, Snooze or Release in the next batch. Retries passing
   * failures (unavailable, a broken stream) while the lease lasts; a
   * refused lease is lost; a result the server refuses fails the job
   * instead, so it is not left to expire.
   */
  async acknowledge(lease: HeldLease, outcome: Outcome): Promise<void> {
    const { id: jobId } = lease.job;
    /** An earlier attempt may have been applied without its answer reaching us. */
    let mayHaveApplied = false;
    for (let attempt = 0; ; attempt++) {
      const result = outcome.kind === "complete" && outcome.result !== undefined ? jsonToValue(outcome.result) : undefined;
      const answer = await this.#acks.send({ jobId, leaseToken: lease.token, outcome: ackOutcome(outcome, result) });
      if (lease.state !== "finishing") return;
      const err = answer.error;
      if (err === undefined) {
        lease.settle(outcome.kind === "release" ? "released" : "acknowledged");
        this.#reportAcknowledged(lease.job, outcome, result);
        return;
      }
      const lost = leaseLostReason(err);
      if (lost === "LEASE_REJECTED" && mayHaveApplied) {
        // Refused because an earlier attempt committed? Then it is ours, not lost.
        const applied = await this.#appliedEarlier(lease, outcome);
        if (lease.state !== "finishing") return;
        if (applied !== undefined) {
          lease.settle(outcome.kind === "release" ? "released" : "acknowledged");
          this.#reportAcknowledged(lease.job, outcome, result, applied);
          return;
        }
      }
      if (lost !== undefined) {
        lease.markLost(lost, `the server refused ${RPC_OF[outcome.kind]}: ${err.rawMessage}`);
        return;
      }
      if (answer.outcomeUnknown === true) mayHaveApplied = true;
      if (outcome.kind === "complete" && err.code === Code.InvalidArgument) {
        this.#onEvent({ type: "error", error: err, job: lease.job });
        outcome = resultRefused("server", err);
        continue;
      }
      if (!TRANSIENT.has(err.code) || this.#cutoff.aborted) {
        lease.settle("dropped");
        this.#onEvent({ type: "error", error: err, job: lease.job });
        return;
      }
      if (lease.expiredLocally) {
        lease.markLost("EXPIRED_LOCALLY", `could not ${outcome.kind} the job before the lease ran out: ${err.rawMessage}`);
        return;
      }
      this.#onEvent({ type: "error", error: err, job: lease.job });
      await pause(backoffCeilingMs(attempt, ACK_RETRY_BACKOFF), this.#cutoff);
    }
  }

  /**
   * The stored job when it shows that an earlier attempt of `outcome` was
   * applied (the state it leads to, and no claim since: same deliveries);
   * undefined when it does not, or cannot be read.
   */
  async #appliedEarlier(lease: HeldLease, outcome: Outcome): Promise<Job | undefined> {
    let job: Job | undefined;
    try {
      job = (await this.#client.getJob({ jobId: lease.job.id }, { timeoutMs: ACK_ANSWER_TIMEOUT_MS, signal: this.#cutoff })).job;
    } catch {
      return undefined;
    }
    if (job === undefined || job.deliveries !== lease.job.deliveries) return undefined;
    switch (outcome.kind) {
      case "complete":
        return job.state === JobState.COMPLETED ? job : undefined;
      case "fail":
        return (job.state === JobState.RETRY || job.state === JobState.DEAD) && job.lastError === outcome.error ? job : undefined;
      case "release":
        return (job.state === JobState.QUEUED || job.state === JobState.RETRY) && job.attempts === lease.job.attempts - 1 ? job : undefined;
      case "snooze":
        return job.state === JobState.QUEUED && job.attempts === lease.job.attempts - 1 ? job : undefined;
    }
  }

  /**
   * The event of an accepted acknowledgement, with the stored job when it
   * was read, else the job as the acknowledgement left it.
   */
  #reportAcknowledged(job: Job, outcome: Outcome, result: Value | undefined, stored?: Job): void {
    if (stored !== undefined) {
      if (outcome.kind === "complete") this.#onEvent({ type: "completed", job: stored });
      else if (outcome.kind === "fail") this.#onEvent({ type: "failed", job: stored, error: outcome.error });
      else if (outcome.kind === "snooze") this.#onEvent({ type: "snoozed", job: stored, delayMs: outcome.delayMs });
      else this.#onEvent({ type: "released", job: stored });
      return;
    }
    const now = Date.now();
    const left = { workerId: "", leaseExpireTime: undefined, updateTime: timestampFromMs(now) };
    switch (outcome.kind) {
      case "complete":
        this.#onEvent({
          type: "completed",
          job: {
            ...job,
            ...left,
            state: JobState.COMPLETED,
            result,
            finishTime: timestampFromMs(now),
          },
        });
        return;
      case "fail": {
        const retry = !outcome.permanent && job.attempts < job.maxAttempts;
        this.#onEvent({
          type: "failed",
          error: outcome.error,
          job: {
            ...job,
            ...left,
            state: retry ? JobState.RETRY : JobState.DEAD,
            lastError: outcome.error,
            scheduleTime: retry && outcome.retryDelayMs !== undefined ? timestampFromMs(now + outcome.retryDelayMs) : undefined,
            finishTime: retry ? undefined : timestampFromMs(now),
          },
        });
        return;
      }
      case "release": {
        const attempts = job.attempts - 1;
        this.#onEvent({
          type: "released",
          job: { ...job, ...left, state: attempts > 0 ? JobState.RETRY : JobState.QUEUED, attempts, scheduleTime: timestampFromMs(now) },
        });
        return;
      }
      case "snooze":
        this.#onEvent({
          type: "snoozed",
          delayMs: outcome.delayMs,
          job: {
            ...job,
            ...left,
            state: JobState.QUEUED,
            attempts: job.attempts - 1,
            scheduleTime: timestampFromMs(now + outcome.delayMs),
          },
        });
        return;
    }
  }
}
