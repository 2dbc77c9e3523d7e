/**
 * leasequeue.v1.LeaseQueueService: the handlers of each group of RPCs,
 * composed into one service. Every handler validates the request, asks the
 * store (or the dispatcher) and maps the answer to wire types; errors thrown
 * in them are translated in one interceptor (errors.ts via
 * server/routes.ts).
 *
 * - job-handlers.ts: Submit, SubmitBatch, GetJob, ListJobs, ListJobEvents, Redrive, Cancel
 * - lease-handlers.ts: Claim, StreamClaims, Work (work-handler.ts), Heartbeat, Complete, Fail, Release, Snooze, Acknowledge
 * - queue-handlers.ts: PauseQueue, ResumeQueue, UpdateQueue, RedriveAll, PurgeQueue, GetStats, ListGroups, GetQueueActivity
 * - schedule-handlers.ts: CreateSchedule, ListSchedules, DeleteSchedule
 * - watch-events-handler.ts: WatchEvents
 * - wait-job-handler.ts: WaitJob
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { jobHandlers, type JobHandlerDeps } from "./job-handlers.js";
import { leaseHandlers, type LeaseHandlerDeps } from "./lease-handlers.js";
import { queueHandlers, type QueueHandlerDeps } from "./queue-handlers.js";
import { scheduleHandlers, type ScheduleHandlerDeps } from "./schedule-handlers.js";
import { waitJobHandler, type WaitJobHandlerDeps } from "./wait-job-handler.js";
import { watchEventsHandler, type WatchEventsHandlerDeps } from "./watch-events-handler.js";

export { IDEMPOTENCY_KEY_HEADER } from "./job-handlers.js";

/** What the handlers need: each group's dependencies, together. */
export type LeaseQueueServiceOptions = JobHandlerDeps &
  LeaseHandlerDeps &
  QueueHandlerDeps &
  ScheduleHandlerDeps &
  WatchEventsHandlerDeps &
  WaitJobHandlerDeps;

export function createLeaseQueueService(opts: LeaseQueueServiceOptions): ServiceImpl<typeof LeaseQueueService> {
  return {
    ...jobHandlers(opts),
    ...leaseHandlers(opts),
    ...queueHandlers(opts),
    ...scheduleHandlers(opts),
    ...watchEventsHandler(opts),
    ...waitJobHandler(opts),
  };
}
