/**
 * The refusals of the state machine and the store, independent of any wire
 * protocol. src/service/errors.ts turns each into its Connect code and
 * google.rpc.ErrorInfo reason (docs/api.md "Errors").
 */
export type QueueErrorReason =
  | "JOB_NOT_FOUND"
  | "LEASE_REJECTED"
  | "LEASE_EXPIRED"
  | "NOT_CANCELLABLE"
  | "NOT_DEAD"
  | "IDEMPOTENCY_MISMATCH"
  /** Submit: a job's dependencies name one job twice once refs and idempotency keys are resolved (docs/api.md "Workflows"). */
  | "DEPENDENCY_REPEATED"
  /** DeleteSchedule: no schedule of that name. */
  | "SCHEDULE_NOT_FOUND"
  | "STORE_UNAVAILABLE"
  /** WatchEvents: after_sequence is older than the oldest stored event (the events between were pruned). */
  | "REPLAY_TOO_OLD"
  /** WatchEvents: after_sequence is larger than any sequence this database has issued. */
  | "SEQUENCE_NOT_ISSUED"
  /** WatchEvents: the subscriber fell too far behind and was dropped. */
  | "SUBSCRIBER_TOO_SLOW"
  /** WatchEvents: the server already serves as many watches as it allows. */
  | "TOO_MANY_SUBSCRIBERS";

export class QueueError extends Error {
  constructor(
    readonly reason: QueueErrorReason,
    message: string,
    readonly metadata: Record<string, string> = {},
  ) {
    super(message);
    this.name = "QueueError";
  }
}

export const jobNotFound = (jobId: string) => new QueueError("JOB_NOT_FOUND", `job ${jobId} does not exist`, { jobId });

export const scheduleNotFound = (name: string) => new QueueError("SCHEDULE_NOT_FOUND", `schedule "${name}" does not exist`, { name });

/** Submit: a dependency that does not exist, named by its field (`depends_on[i]`, or `jobs[n].depends_on[i]` in a batch). */
export const dependencyNotFound = (field: string, jobId: string) =>
  new QueueError("JOB_NOT_FOUND", `${field}: job ${jobId} does not exist`, { jobId, field });
