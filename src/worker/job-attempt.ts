/**
 * One attempt of a job: the handler's contract (JobHandler, JobContext)
 * and running it once on a held lease, from the context it gets to the
 * Outcome its return or throw means.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { failureOf, type Outcome } from "./attempt-outcome.js";
import { SnoozeJob } from "./errors.js";
import type { HeldLease } from "./held-lease.js";
import { dependenciesOf, dependencyResult, type Dependency } from "./job-dependencies.js";
import { jsonToValue, valueToJson } from "./json-values.js";
import { asJsonResult, checkedProgress } from "./result-checks.js";

/** What a handler gets besides the job. */
export interface JobContext {
  /**
   * Aborted when the worker no longer owns the job: the lease was lost
   * (reason: LeaseLostError) or close() stopped waiting (reason:
   * WorkerClosedError). Pass it to fetch(), timers and child processes, and
   * stop side effects when it fires.
   */
  readonly signal: AbortSignal;
  /** The job's payload as plain JSON (`null` when none was submitted). */
  readonly payload: JsonValue;
  /**
   * The outcomes of the jobs this one depends on (docs/api.md
   * "Dependencies"), the first 100 in `job.dependsOn` order; empty for a job
   * without dependencies.
   */
  readonly dependencies: readonly Dependency[];
  /** True when the job has more than the 100 dependencies in `dependencies`. */
  readonly dependenciesTruncated: boolean;
  /**
   * The result of the dependency `jobId` as plain JSON (`null` when it has
   * none), typed `T` unchecked, as a cast of `payload` would be: e.g.
   * `ctx.dependencyResult<{ url: string }>(id).url`. Throws a RangeError
   * when `jobId` is not among `dependencies`.
   */
  dependencyResult<T = JsonValue>(jobId: string): T;
  /** The lease token, e.g. as a fencing token for a downstream store. Never log it. */
  readonly leaseToken: string;
  /** When the lease runs out unless extended, as the server last reported it. */
  readonly leaseExpireTime: Date;
  /** This worker's id. */
  readonly workerId: string;
  /**
   * Extends the lease now. The SDK already heartbeats every
   * `heartbeatInterval`; call this after a step that may have stalled the
   * event loop. Rejects with LeaseLostError when the lease is gone, or with
   * the ConnectError of a call that failed otherwise (the timer keeps trying).
   */
  heartbeat(): Promise<void>;
  /**
   * Reports the job's progress (any JSON value, at most 4 KiB as compact JSON
   * and 32 levels deep): stored as the job's `progress`, shown by GetJob and
   * the console (docs/api.md "Snooze and progress"). It goes with the next
   * heartbeat, brought forward to at most a second from now; reports made in
   * between replace each other, so calling this in a tight loop costs one
   * heartbeat a second. The last report before the handler ends is sent ahead
   * of its Complete, Fail or Snooze. Throws RangeError or TypeError for a
   * value the server would refuse.
   */
  progress(value: JsonValue): void;
  /**
   * Ends this attempt without failing it: the job goes back to QUEUED,
   * eligible again after `delayMs` (0..30 days), and the attempt is refunded
   * (docs/api.md "Snooze and progress"). Throws a SnoozeJob to stop the
   * handler; the job is snoozed however the handler then ends, even if it
   * catches that error and returns.
   */
  snooze(delayMs: number): never;
}

/**
 * Runs one job. The value it returns (any JSON, at most 64 KiB; `undefined`
 * for none) becomes the job's result; a thrown error fails the attempt:
 * PermanentJobError dead-letters, RetryJobError sets the retry delay, any
 * other error retries with the job's backoff while attempts remain. A
 * thrown SnoozeJob (or `ctx.snooze()`) snoozes the job instead: queued
 * again after its delay, the attempt refunded.
 */
export type JobHandler = (job: Job, ctx: JobContext) => Promise<JsonValue | void> | JsonValue | void;

/**
 * Runs `handler` once on the lease's job and says how the attempt ended.
 * `starting` is called just before the handler (the lease moves to
 * running). A snooze the handler asked for (ctx.snooze()) decides the
 * outcome however the handler then ends.
 */
export async function runAttempt(lease: HeldLease, handler: JobHandler, workerId: string, starting: () => void): Promise<Outcome> {
  /** Set by ctx.snooze(): decides the outcome however the handler ends. */
  let snoozed: SnoozeJob | undefined;
  const dependencies = dependenciesOf(lease.dependencies);
  const ctx: JobContext = {
    signal: lease.signal,
    payload: valueToJson(lease.job.payload),
    dependencies,
    dependenciesTruncated: lease.dependenciesTruncated,
    dependencyResult: <T = JsonValue>(jobId: string) => dependencyResult(dependencies, lease.dependenciesTruncated, jobId) as T,
    leaseToken: lease.token,
    get leaseExpireTime() {
      return lease.leaseExpireTime;
    },
    workerId,
    heartbeat: () => lease.heartbeat(),
    progress: (value) => lease.reportProgress(jsonToValue(checkedProgress(value))),
    snooze: (delayMs) => {
      snoozed = new SnoozeJob(delayMs);
      throw snoozed;
    },
  };
  starting();
  let outcome: Outcome;
  try {
    outcome = { kind: "complete", result: asJsonResult(await handler(lease.job, ctx)) };
  } catch (err) {
    outcome = failureOf(err);
  }
  if (snoozed !== undefined) outcome = { kind: "snooze", delayMs: snoozed.delayMs };
  return outcome;
}
