import { createHash } from "node:crypto";
import { QueueError } from "./errors.js";
import { newJobId } from "./ids.js";
import type { DependencyPolicy, StoredJob } from "./job.js";
import type { TraceContext } from "./trace-context.js";

/** A submit request after validation and defaults (docs/api.md "Defaults and identity"). */
export interface NewJob {
  queue: string;
  task: string;
  /** The job's group (docs/api.md "Groups"); "" for none. */
  groupKey: string;
  /** Compact JSON text ("null" when absent). */
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  retryBaseDelayMs: number;
  /** Absolute start (`schedule_time`), relative start (`delay`), or now. */
  schedule: { at: number } | { delayMs: number } | null;
  idempotencyKey: string | null;
  /**
   * The trace context the job stores (docs/api.md "Trace context"): the
   * field's, else the call's headers', else (tracing on) the server's
   * PRODUCER span's; null for none. Not part of submitFingerprint: a retried
   * request carries another trace and still names the same job.
   */
  traceContext: TraceContext | null;
  /** The jobs it waits for (docs/api.md "Workflows"); absent when none. */
  dependencies?: NewJobDependencies;
}

/** What a submission names as its dependencies, as validated. */
export interface NewJobDependencies {
  /** `depends_on`: ids of stored jobs. */
  ids: readonly string[];
  /** `depends_on_refs` as given (compared for an idempotency key). */
  refs: readonly string[];
  /** The refs resolved: indexes into the same SubmitBatch, in `refs` order. */
  refIndexes: readonly number[];
  policy: DependencyPolicy;
  /** Where the job is in its request ("" for Submit, "jobs[2]." in a SubmitBatch), for the fields a refusal names. */
  path: string;
}

export function scheduleTimeOf(job: NewJob, now: number): number {
  if (job.schedule === null) return now;
  return "at" in job.schedule ? job.schedule.at : now + job.schedule.delayMs;
}

/**
 * The identity of a submit request for idempotency: the request after
 * defaults, with object keys in a canonical order, so the same request sent
 * again (with or without default fields, key given as header or field)
 * matches, and any difference does not. A relative `delay` is compared as
 * given, not as the time it resolved to.
 */
export function submitFingerprint(job: NewJob): string {
  const identity: unknown[] = [
    job.queue,
    job.task,
    canonicalJson(JSON.parse(job.payloadJson)),
    job.priority,
    job.maxAttempts,
    job.retryBaseDelayMs,
    job.schedule === null ? null : "at" in job.schedule ? ["at", job.schedule.at] : ["delay", job.schedule.delayMs],
  ];
  // Appended only when set, so that the fingerprints stored before groups existed still match their requests.
  if (job.groupKey !== "") identity.push(["group", job.groupKey]);
  const deps = job.dependencies;
  if (deps !== undefined) identity.push(["depends", deps.ids, deps.refs, deps.policy]);
  return createHash("sha256").update(JSON.stringify(identity)).digest("base64url");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The job a submission creates: QUEUED, eligible at its schedule time, no attempt spent. */
export function newStoredJob(spec: NewJob, now: number): StoredJob {
  return {
    id: newJobId(now),
    queue: spec.queue,
    task: spec.task,
    groupKey: spec.groupKey,
    payloadJson: spec.payloadJson,
    priority: spec.priority,
    state: "queued",
    attempts: 0,
    maxAttempts: spec.maxAttempts,
    retryBaseDelayMs: spec.retryBaseDelayMs,
    scheduleTime: scheduleTimeOf(spec, now),
    createTime: now,
    updateTime: now,
    finishTime: null,
    workerId: null,
    leaseExpireTime: null,
    deliveries: 0,
    lastError: null,
    resultJson: null,
    progressJson: null,
    traceContext: spec.traceContext,
    leaseTokenHash: null,
    leaseDurationMs: null,
    idempotencyKey: spec.idempotencyKey,
    requestHash: spec.idempotencyKey === null ? null : submitFingerprint(spec),
    heartbeatEventTime: null,
    progressEventTime: null,
    dependsOn: [],
    dependencyCounts: null,
    dependencyPolicy: null,
    hasDependents: false,
  };
}

/**
 * The idempotency decision (docs/api.md "Idempotency keys"): a submission
 * whose key already names a job (`existing`: stored, or created earlier in
 * the same batch) returns that job when the request is the same, and is
 * refused with IDEMPOTENCY_MISMATCH when it is not; any other submission
 * creates a job.
 */
export function resolveSubmission(spec: NewJob, existing: StoredJob | undefined, now: number): { job: StoredJob; created: boolean } {
  if (existing === undefined || spec.idempotencyKey === null) return { job: newStoredJob(spec, now), created: true };
  if (existing.requestHash !== submitFingerprint(spec)) {
    throw new QueueError(
      "IDEMPOTENCY_MISMATCH",
      `idempotency_key was already used in queue "${spec.queue}" for a different request (job ${existing.id})`,
      { jobId: existing.id, queue: spec.queue },
    );
  }
  return { job: existing, created: false };
}
