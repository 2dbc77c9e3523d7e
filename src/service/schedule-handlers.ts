/**
 * The schedule RPCs of leasequeue.v1.LeaseQueueService (docs/api.md
 * "Schedules"): CreateSchedule, ListSchedules, DeleteSchedule. The
 * template's queue is checked as a Submit's would be; replacing or deleting
 * a schedule also needs the queue of the schedule that is there (to a
 * token limited to queues, DeleteSchedule of another queue's schedule is
 * that of a name that names no schedule: queue-access.ts).
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../domain/clock.js";
import type { Scheduler } from "../maintenance/scheduler.js";
import type { Logger } from "../logger.js";
import type { Store } from "../store/store.js";
import type { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { requireQueue, requireScheduleToDelete, requireScheduleToReplace, visibleQueues } from "./queue-access.js";
import * as v from "./validate.js";
import { scheduleToWire } from "./wire.js";

export interface ScheduleHandlerDeps {
  store: Store;
  clock: Clock;
  /** Told when a schedule is created, replaced or deleted, so its timer follows at once. Default: nobody. */
  scheduler?: Pick<Scheduler, "rearm">;
  /** Where saved and deleted schedules are reported. Default: nowhere. */
  log?: Logger;
}

type ScheduleHandlers = Pick<ServiceImpl<typeof LeaseQueueService>, "createSchedule" | "listSchedules" | "deleteSchedule">;

export function scheduleHandlers({ store, clock, scheduler, log }: ScheduleHandlerDeps): ScheduleHandlers {
  return {
    async createSchedule(req, ctx) {
      const spec = v.scheduleSpec("schedule.", req.schedule, clock.now());
      requireQueue(ctx, "schedule.template.queue", spec.template.queue);
      await requireScheduleToReplace(ctx, store, "schedule.name", spec.name);
      const stored = await store.createSchedule(spec);
      scheduler?.rearm();
      log?.info("schedule saved", {
        schedule: stored.name,
        queue: stored.template.queue,
        paused: stored.paused,
        nextRunTime: stored.nextRunTime === null ? null : new Date(stored.nextRunTime).toISOString(),
      });
      return { schedule: scheduleToWire(stored) };
    },

    async listSchedules(_req, ctx) {
      const schedules = await store.listSchedules();
      const visible = visibleQueues(
        ctx,
        schedules.map((schedule) => ({ queue: schedule.template.queue, schedule })),
      );
      return { schedules: visible.map((entry) => scheduleToWire(entry.schedule)) };
    },

    async deleteSchedule(req, ctx) {
      const name = v.queueName("name", req.name);
      await requireScheduleToDelete(ctx, store, name);
      await store.deleteSchedule(name);
      scheduler?.rearm();
      log?.info("schedule deleted", { schedule: name });
      return {};
    },
  };
}
