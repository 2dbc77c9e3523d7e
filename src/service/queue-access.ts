/**
 * Queue limits of authenticated callers (SECURITY.md "Authentication",
 * "Queue lists"): a token may be limited to a list of queues. The edge
 * (server/) authenticates the call and checks its role; the queue a call
 * touches is often known only here, so the handlers check it with these:
 * the queue a request names (permission_denied naming it), the queue of the
 * job it names (answered exactly as a job that does not exist), the queues
 * of a submission's dependencies, the filters of ListJobs and WatchEvents,
 * and the schedules. Without authentication, or for a token without a
 * queue list, nothing here costs anything.
 */
import { Code, ConnectError, createContextKey, type HandlerContext } from "@connectrpc/connect";
import { jobNotFound, scheduleNotFound } from "../domain/errors.js";
import type { StoredSchedule } from "../domain/schedule.js";
import type { NewJob } from "../domain/submission.js";
import type { Store } from "../store/store.js";
import { toConnectError } from "./errors.js";
import type { Role } from "./rpc-roles.js";

/** The authenticated caller of a call: a token of the auth file. */
export interface Caller {
  /** The token's name in the auth file (never the token). */
  name: string;
  roles: ReadonlySet<Role>;
  /** The only queues the token may touch; undefined: every queue. */
  queues?: ReadonlySet<string>;
}

/** Set by the edge for every authenticated call; undefined when authentication is off (or in memory, in tests). */
export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "leasequeue caller" });

interface LimitedCaller {
  name: string;
  queues: ReadonlySet<string>;
}

function limited(ctx: HandlerContext): LimitedCaller | undefined {
  const caller = ctx.values.get(callerKey);
  return caller?.queues === undefined ? undefined : { name: caller.name, queues: caller.queues };
}

function denied(caller: LimitedCaller, field: string, what: string): ConnectError {
  const allowed = [...caller.queues].sort().join(", ");
  return new ConnectError(`${field}: ${what}; token "${caller.name}" may use only the queues ${allowed}`, Code.PermissionDenied);
}

/** Whether the caller is limited to some queues (false without authentication). */
export function hasQueueLimit(ctx: HandlerContext): boolean {
  return limited(ctx) !== undefined;
}

/** Throws permission_denied unless the caller may use `queue` (named by the request's `field`). */
export function requireQueue(ctx: HandlerContext, field: string, queue: string): void {
  const caller = limited(ctx);
  if (caller !== undefined && !caller.queues.has(queue)) throw denied(caller, field, `queue "${queue}" is not permitted`);
}

/** For ListJobs and WatchEvents: a limited caller must filter by one of its queues. */
export function requireQueueFilter(ctx: HandlerContext, field: string, queue: string | undefined): void {
  const caller = limited(ctx);
  if (caller === undefined) return;
  if (queue === undefined) throw denied(caller, field, "is required for a token limited to queues");
  requireQueue(ctx, field, queue);
}

/**
 * For a caller limited to queues: throws what an id that names no job is
 * answered (jobNotFound, as the store throws it) unless the job exists in one
 * of the caller's queues. A job it may not use is, to it, a job that does not
 * exist.
 */
export async function requireJobQueue(ctx: HandlerContext, store: Store, jobId: string): Promise<void> {
  const caller = limited(ctx);
  if (caller === undefined) return;
  const job = await store.getJob(jobId);
  if (job === undefined || !caller.queues.has(job.queue)) throw jobNotFound(jobId);
}

/**
 * For Submit and SubmitBatch (docs/api.md "Workflows"): throws
 * permission_denied, naming the field, for a dependency in a queue the
 * caller may not use (without naming that queue). A dependency that does not
 * exist is left to the store, which answers it `not_found`.
 */
export async function requireDependencyQueues(ctx: HandlerContext, store: Store, specs: readonly NewJob[]): Promise<void> {
  const caller = limited(ctx);
  if (caller === undefined) return;
  for (const spec of specs) {
    const deps = spec.dependencies;
    if (deps === undefined) continue;
    const jobs = await Promise.all(deps.ids.map((id) => store.getJob(id)));
    jobs.forEach((job, i) => {
      if (job !== undefined && !caller.queues.has(job.queue)) {
        throw denied(caller, `${deps.path}depends_on[${i}]`, `job ${deps.ids[i]} is in a queue that is not permitted`);
      }
    });
  }
}

/** The entries of the caller's queues (GetStats). */
export function visibleQueues<T extends { queue: string }>(ctx: HandlerContext, entries: T[]): T[] {
  const caller = limited(ctx);
  return caller === undefined ? entries : entries.filter((e) => caller.queues.has(e.queue));
}

/**
 * For a batch of acknowledgements: the refusal of each one whose job the
 * caller may not see (undefined where it may), exactly what the store's
 * jobNotFound becomes on the wire, as requireJobQueue answers; or undefined
 * when the caller has no limit.
 */
export async function refusedJobs(
  ctx: HandlerContext,
  store: Store,
  jobIds: readonly string[],
): Promise<(ConnectError | undefined)[] | undefined> {
  const caller = limited(ctx);
  if (caller === undefined) return undefined;
  const jobs = await Promise.all(jobIds.map((id) => store.getJob(id)));
  return jobs.map((job, i) => (job === undefined || !caller.queues.has(job.queue) ? toConnectError(jobNotFound(jobIds[i])) : undefined));
}

/**
 * For CreateSchedule: throws permission_denied if a schedule of this name
 * submits into a queue the caller may not use (replacing it would take it
 * over). Schedule names are one namespace for every queue, so the refusal
 * tells that the name is taken, but not by which queue.
 */
export async function requireScheduleToReplace(ctx: HandlerContext, store: Store, field: string, name: string): Promise<void> {
  const caller = limited(ctx);
  if (caller === undefined) return;
  const schedule = await findSchedule(store, name);
  if (schedule !== undefined && !caller.queues.has(schedule.template.queue)) {
    throw denied(caller, field, `schedule "${name}" submits into a queue that is not permitted`);
  }
}

/**
 * For DeleteSchedule, for a caller limited to queues: throws what a name that
 * names no schedule is answered (scheduleNotFound, as the store throws it)
 * unless the schedule submits into one of the caller's queues.
 */
export async function requireScheduleToDelete(ctx: HandlerContext, store: Store, name: string): Promise<void> {
  const caller = limited(ctx);
  if (caller === undefined) return;
  const schedule = await findSchedule(store, name);
  if (schedule === undefined || !caller.queues.has(schedule.template.queue)) throw scheduleNotFound(name);
}

/** The schedule of this name, if there is one. */
async function findSchedule(store: Store, name: string): Promise<StoredSchedule | undefined> {
  return (await store.listSchedules()).find((s) => s.name === name);
}
