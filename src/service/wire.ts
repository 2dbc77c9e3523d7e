/**
 * The mapping between domain records and leasequeue.v1 messages, in one
 * place. A Job on the wire never carries a lease token or idempotency key:
 * only the fields listed here are copied.
 */
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import type {
  DependencyCounts,
  Job as DomainJob,
  JobEvent as DomainEvent,
  EventKind as DomainKind,
  JobState as DomainState,
} from "../domain/job.js";
import type { StoredSchedule } from "../domain/schedule.js";
import { traceContextMap } from "../domain/trace-context.js";
import { hasLimits, type QueueConfig as DomainQueueConfig } from "../domain/queue-limits.js";
import type { ActivityPoint } from "../store/reads/queue-activity.js";
import type { ClaimedLease, GroupCounts, QueueCounts } from "../store/store.js";
import {
  DependencyCountsSchema,
  DependencyResultSchema,
  EventKind,
  GroupStatsSchema,
  JobEventSchema,
  JobSchema,
  JobState,
  LeaseSchema,
  QueueActivityPointSchema,
  QueueConfigSchema,
  QueueStatsSchema,
  ScheduleSchema,
  SubmitRequestSchema,
  type GroupStats,
  type Job,
  type JobEvent,
  type Lease,
  type QueueActivityPoint,
  type QueueConfig,
  type QueueStats,
  type Schedule,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

export const STATE_TO_WIRE: Record<DomainState, JobState> = {
  queued: JobState.QUEUED,
  running: JobState.RUNNING,
  retry: JobState.RETRY,
  completed: JobState.COMPLETED,
  dead: JobState.DEAD,
  cancelled: JobState.CANCELLED,
  waiting: JobState.WAITING,
};

export const STATE_FROM_WIRE = new Map<JobState, DomainState>(Object.entries(STATE_TO_WIRE).map(([k, v]) => [v, k as DomainState]));

export const KIND_TO_WIRE: Record<DomainKind, EventKind> = {
  submitted: EventKind.SUBMITTED,
  claimed: EventKind.CLAIMED,
  heartbeat: EventKind.HEARTBEAT,
  completed: EventKind.COMPLETED,
  failed: EventKind.FAILED,
  dead_lettered: EventKind.DEAD_LETTERED,
  lease_expired: EventKind.LEASE_EXPIRED,
  redriven: EventKind.REDRIVEN,
  cancelled: EventKind.CANCELLED,
  released: EventKind.RELEASED,
  snoozed: EventKind.SNOOZED,
  progress: EventKind.PROGRESS,
  scheduled: EventKind.SCHEDULED,
  dependencies_met: EventKind.DEPENDENCIES_MET,
};

function jsonValue(text: string | null) {
  return text === null ? undefined : fromJson(ValueSchema, JSON.parse(text) as JsonValue);
}

/**
 * A job as the wire's Job. `basic` (JOB_VIEW_BASIC) leaves out payload,
 * result and last_error: the fields that make a job large.
 */
export function jobToWire(job: DomainJob, basic = false): Job {
  if (basic) {
    return create(JobSchema, jobEnvelope(job));
  }
  return create(JobSchema, {
    ...jobEnvelope(job),
    payload: jsonValue(job.payloadJson),
    lastError: job.lastError ?? "",
    result: jsonValue(job.resultJson),
  });
}

/** Every Job field but payload, result and last_error; server/fast-wire/lease-encoding.ts writes the same fields. */
function jobEnvelope(job: DomainJob) {
  return {
    id: job.id,
    queue: job.queue,
    task: job.task,
    priority: job.priority,
    state: STATE_TO_WIRE[job.state],
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    retryBaseDelay: durationFromMs(job.retryBaseDelayMs),
    scheduleTime: timestampFromMs(job.scheduleTime),
    createTime: timestampFromMs(job.createTime),
    updateTime: timestampFromMs(job.updateTime),
    finishTime: job.finishTime === null ? undefined : timestampFromMs(job.finishTime),
    workerId: job.workerId ?? "",
    leaseExpireTime: job.leaseExpireTime === null ? undefined : timestampFromMs(job.leaseExpireTime),
    deliveries: job.deliveries,
    // Small (at most 4 KiB) and what a list of running jobs is read for: kept in JOB_VIEW_BASIC.
    progress: jsonValue(job.progressJson),
    groupKey: job.groupKey,
    // Small (two W3C headers) and what ties the job to its trace: kept in JOB_VIEW_BASIC.
    traceContext: traceContextMap(job.traceContext),
    // Kept in JOB_VIEW_BASIC: what a WAITING job waits on (docs/api.md "Workflows").
    dependsOn: [...job.dependsOn],
    dependencyCounts: job.dependencyCounts === null ? undefined : dependencyCountsToWire(job.dependencyCounts),
  };
}

/** Job.dependency_counts: pending is what is neither COMPLETED nor failed. */
export function dependencyCountsToWire(c: DependencyCounts) {
  return create(DependencyCountsSchema, {
    total: c.total,
    completed: c.completed,
    failed: c.failed,
    pending: c.total - c.completed - c.failed,
  });
}

export function leaseToWire(lease: ClaimedLease): Lease {
  const deps = lease.dependencies ?? [];
  return create(LeaseSchema, {
    job: jobToWire(lease.job),
    leaseToken: lease.leaseToken,
    dependencies: deps.map((d) =>
      create(DependencyResultSchema, {
        jobId: d.jobId,
        state: STATE_TO_WIRE[d.state],
        result: jsonValue(d.resultJson),
        lastError: d.lastError ?? "",
      }),
    ),
    dependenciesTruncated: lease.job.dependsOn.length > deps.length,
  });
}

export function eventToWire(e: DomainEvent): JobEvent {
  return create(JobEventSchema, {
    sequence: BigInt(e.sequence),
    jobId: e.jobId,
    queue: e.queue,
    kind: KIND_TO_WIRE[e.kind],
    fromState: e.fromState === null ? JobState.UNSPECIFIED : STATE_TO_WIRE[e.fromState],
    toState: STATE_TO_WIRE[e.toState],
    eventTime: timestampFromMs(e.eventTime),
    workerId: e.workerId ?? "",
    attempt: e.attempt,
    message: e.message ?? "",
    groupKey: e.groupKey,
  });
}

/**
 * A queue's limits and group rules as QueueStats.config and
 * UpdateQueueResponse.config carry them: absent for a queue with neither
 * (see the proto's QueueStats), so such a queue shows no rate_period of a
 * rate limit it does not have.
 */
export function queueConfigToWire(config: DomainQueueConfig): QueueConfig | undefined {
  if (!hasLimits(config)) return undefined;
  return create(QueueConfigSchema, {
    maxRunning: config.maxRunning,
    rateLimit: config.rateLimit,
    ratePeriod: durationFromMs(config.ratePeriodMs),
    groupMaxRunning: config.groupMaxRunning,
    groupRateLimit: config.groupRateLimit,
    fair: config.fair,
    ordered: config.ordered,
  });
}

/** One queue's stats (with its config), or a total (no config). */
export function statsToWire(
  queue: string,
  counts: QueueCounts["counts"],
  oldestPendingAgeMs: number,
  paused = false,
  config?: DomainQueueConfig,
): QueueStats {
  return create(QueueStatsSchema, {
    queue,
    queued: BigInt(counts.queued),
    running: BigInt(counts.running),
    retry: BigInt(counts.retry),
    completed: BigInt(counts.completed),
    dead: BigInt(counts.dead),
    cancelled: BigInt(counts.cancelled),
    waiting: BigInt(counts.waiting),
    oldestPendingAge: durationFromMs(oldestPendingAgeMs),
    paused,
    config: config === undefined ? undefined : queueConfigToWire(config),
  });
}

/** One group of a queue as ListGroups lists it; oldest_pending_time absent when the group has no queued or retry job. */
export function groupStatsToWire(g: GroupCounts): GroupStats {
  return create(GroupStatsSchema, {
    groupKey: g.groupKey,
    queued: BigInt(g.queued),
    running: BigInt(g.running),
    retry: BigInt(g.retry),
    oldestPendingTime: g.oldestPendingTime === null ? undefined : timestampFromMs(g.oldestPendingTime),
  });
}

/** A schedule as the wire's Schedule: the template as the SubmitRequest it was validated from (defaults applied). */
export function scheduleToWire(s: StoredSchedule): Schedule {
  const t = s.template;
  return create(ScheduleSchema, {
    name: s.name,
    recurrence:
      "cron" in s.recurrence
        ? { case: "cron", value: s.recurrence.cron }
        : { case: "interval", value: durationFromMs(s.recurrence.intervalMs) },
    timezone: s.timezone,
    template: create(SubmitRequestSchema, {
      queue: t.queue,
      task: t.task,
      payload: jsonValue(t.payloadJson),
      priority: t.priority,
      maxAttempts: t.maxAttempts,
      retryBaseDelay: durationFromMs(t.retryBaseDelayMs),
      schedule: t.delayMs === null ? { case: undefined } : { case: "delay", value: durationFromMs(t.delayMs) },
      groupKey: t.groupKey,
    }),
    paused: s.paused,
    nextRunTime: s.nextRunTime === null ? undefined : timestampFromMs(s.nextRunTime),
    lastRunTime: s.lastRunTime === null ? undefined : timestampFromMs(s.lastRunTime),
  });
}

/** One point of GetQueueActivity (docs/api.md "Queue activity"); a percentile without a lease is absent. */
export function activityPointToWire(p: ActivityPoint): QueueActivityPoint {
  return create(QueueActivityPointSchema, {
    startTime: timestampFromMs(p.startTime),
    completed: BigInt(p.completed),
    failed: BigInt(p.failed),
    queued: BigInt(p.queued),
    retry: BigInt(p.retry),
    running: BigInt(p.running),
    leased: BigInt(p.leased),
    leaseWaitP50: p.leaseWaitP50Ms === null ? undefined : durationFromMs(Math.round(p.leaseWaitP50Ms)),
    leaseWaitP95: p.leaseWaitP95Ms === null ? undefined : durationFromMs(Math.round(p.leaseWaitP95Ms)),
  });
}
