/**
 * LeaseQueue's client side for Node.js, exported as `leasequeue`
 * and `leasequeue/worker`:
 *
 * - createLeaseQueueClient(): a typed client for producers and operators
 *   (gRPC or Connect); submitAndWait() submits a job and waits for its end.
 * - createWorker(): a worker over the Work stream (StreamClaims plus
 *   Acknowledge on HTTP/1.1) with batched acknowledgements, heartbeats, retries,
 *   reconnects and a bounded close().
 *
 * Guide: docs/writing-a-worker.md. Wire contract: proto/leasequeue/v1.
 */
export {
  createLeaseQueueClient,
  type JsonLeaseQueueClient,
  type JsonSubmitRequest,
  type LeaseQueueClient,
  type LeaseQueueClientOptions,
  type LeaseQueueTransport,
} from "./client.js";
export { createWorker, type Worker } from "./worker.js";
export { submitAndWait, type SubmitAndWaitOptions, type WaitedJob } from "./submit-and-wait.js";
export type { JobContext, JobHandler } from "./job-attempt.js";
export type { Dependency } from "./job-dependencies.js";
export type { WorkerTracingOptions } from "./attempt-span.js";
export { currentTraceContext } from "./trace-propagation.js";
export type { WorkerEvent } from "./worker-events.js";
export type { WorkerOptions } from "./worker-options.js";
export {
  JobCancelledError,
  LeaseLostError,
  PermanentJobError,
  RetryJobError,
  SnoozeJob,
  WorkerClosedError,
  type LeaseLostReason,
  type RetryJobErrorOptions,
} from "./errors.js";
export type { BackoffOptions } from "./backoff.js";
export { jsonToValue, valueToJson } from "./json-values.js";
export {
  DependencyFailurePolicy,
  EventKind,
  JobState,
  LeaseQueueService,
  type DependencyCounts,
  type DependencyResult,
  type Job,
  type JobEvent,
  type Lease,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
