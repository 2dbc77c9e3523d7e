/**
 * An event row as both engines read it (the job_events columns by name,
 * SQLite's and PostgreSQL's alike), as a domain value.
 */
import type { JobEvent, JobState } from "../../domain/job.js";

export function toEvent(r: Record<string, unknown>): JobEvent {
  return {
    sequence: r.sequence as number,
    jobId: r.job_id as string,
    queue: r.queue as string,
    groupKey: r.group_key as string,
    kind: r.kind as JobEvent["kind"],
    fromState: r.from_state as JobState | null,
    toState: r.to_state as JobState,
    eventTime: r.event_time as number,
    workerId: r.worker_id as string | null,
    attempt: r.attempt as number,
    message: r.message as string | null,
  };
}
