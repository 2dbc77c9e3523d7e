/**
 * ListJobs on both engines reads one backward index range per state and
 * merges them (docs/performance.md "Writes per job" and "Writes per job on
 * SQLite"): no index holds a queue's jobs by id alone.
 */
import { JOB_STATES, type JobState } from "../../domain/job.js";

/**
 * The distinct states a listing reads a range of: the ones asked for, or,
 * for a queue without states, all six (its whole listing is their union);
 * none when neither narrows it (the listing reads the primary key).
 */
export function listedStates(spec: { queue?: string; states?: readonly JobState[] }): JobState[] {
  if (spec.states !== undefined && spec.states.length > 0) return [...new Set(spec.states)];
  return spec.queue !== undefined ? [...JOB_STATES] : [];
}
