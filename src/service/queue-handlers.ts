/**
 * The queue RPCs of leasequeue.v1.LeaseQueueService: the controls of
 * docs/api.md "Queue controls" (PauseQueue, ResumeQueue, RedriveAll,
 * PurgeQueue), the limits of "Queue limits" and the group rules of "Groups"
 * (UpdateQueue), GetStats, ListGroups, and GetQueueActivity ("Queue
 * activity").
 *
 * Pause, resume and limits are queue-level changes, not job events: they
 * are logged here and announced by the store beside the events of their
 * commit, so held-back claimers wake.
 */
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../domain/clock.js";
import { JOB_STATES, type JobState } from "../domain/job.js";
import { NO_QUEUE_LIMITS } from "../domain/queue-limits.js";
import type { Logger } from "../logger.js";
import type { QueueCounts, Store } from "../store/store.js";
import { activityPoints, activityWindow } from "../store/reads/queue-activity.js";
import {
  GetQueueActivityResponseSchema,
  GetStatsResponseSchema,
  ListGroupsResponseSchema,
  type LeaseQueueService,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { invalidArgument } from "./errors.js";
import { decodePageToken, encodePageToken, groupsFilterKey } from "./page-token.js";
import { requireQueue, visibleQueues } from "./queue-access.js";
import * as v from "./validate.js";
import { activityPointToWire, groupStatsToWire, queueConfigToWire, statsToWire } from "./wire.js";

export interface QueueHandlerDeps {
  store: Store;
  clock: Clock;
  /** Where operators' queue controls are reported. Default: nowhere. */
  log?: Logger;
}

type QueueHandlers = Pick<
  ServiceImpl<typeof LeaseQueueService>,
  "pauseQueue" | "resumeQueue" | "updateQueue" | "redriveAll" | "purgeQueue" | "getStats" | "listGroups" | "getQueueActivity"
>;

export function queueHandlers({ store, clock, log }: QueueHandlerDeps): QueueHandlers {
  /** One queue's stats as GetStats would list them (zeros for a queue that has no jobs and is not paused). */
  async function statsOfQueue(queue: string) {
    const q: QueueCounts = (await store.queueCounts()).find((c) => c.queue === queue) ?? {
      queue,
      counts: Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as QueueCounts["counts"],
      oldestPendingSince: null,
      paused: false,
      config: { ...NO_QUEUE_LIMITS },
    };
    return statsToWire(q.queue, q.counts, ageMs(clock.now(), q.oldestPendingSince), q.paused, q.config);
  }

  return {
    async pauseQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      if (await store.pauseQueue(queue)) log?.info("queue paused", { queue });
      return { stats: await statsOfQueue(queue) };
    },

    async resumeQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      if (await store.resumeQueue(queue)) log?.info("queue resumed", { queue });
      return { stats: await statsOfQueue(queue) };
    },

    // The store applies the mask in one transaction and announces the change.
    async updateQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      const update = v.queueConfigUpdate(req);
      requireQueue(ctx, "queue", queue);
      const config = await store.updateQueueConfig(queue, update);
      log?.info("queue limits set", { queue, fields: update.fields, ...config });
      return { config: queueConfigToWire(config) };
    },

    async redriveAll(req, ctx) {
      const spec = {
        queue: v.queueName("queue", req.queue),
        task: v.optionalName("task", req.task),
        limit: v.limitOrAll("limit", req.limit),
      };
      requireQueue(ctx, "queue", spec.queue);
      const redriven = await store.redriveAll(spec, { signal: ctx.signal });
      log?.info("dead jobs redriven", { ...spec, redriven });
      return { redriven: BigInt(redriven) };
    },

    async purgeQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      v.purgeConfirmation("confirm", req.confirm, queue);
      const cancelled = await store.purgeQueue(queue, { signal: ctx.signal });
      log?.info("queue purged", { queue, cancelled });
      return { cancelled: BigInt(cancelled) };
    },

    async getStats(_req, ctx) {
      const now = clock.now();
      const queues = visibleQueues(ctx, await store.queueCounts());
      const total = { queued: 0, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0, waiting: 0 };
      let oldest: number | null = null;
      const perQueue = queues.map((q) => {
        for (const s of Object.keys(total) as JobState[]) total[s] += q.counts[s];
        if (q.oldestPendingSince !== null && (oldest === null || q.oldestPendingSince < oldest)) {
          oldest = q.oldestPendingSince;
        }
        return statsToWire(q.queue, q.counts, ageMs(now, q.oldestPendingSince), q.paused, q.config);
      });
      return create(GetStatsResponseSchema, { queues: perQueue, total: statsToWire("", total, ageMs(now, oldest)) });
    },

    // docs/api.md "Groups": a page of the queue's groups with unfinished jobs, in group_key order.
    // One row more than the page tells whether there is a next page.
    async listGroups(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      const limit = v.intInRange("page_size", req.pageSize, v.BOUNDS.groupPageSize, v.DEFAULTS.groupPageSize);
      requireQueue(ctx, "queue", queue);
      const filter = groupsFilterKey(queue);
      const afterKey = req.pageToken === "" ? "" : decodePageToken(req.pageToken, filter, "ListGroups");
      if (req.pageToken !== "" && !v.BOUNDS.groupKey.test(afterKey)) {
        throw invalidArgument("page_token", "is not a token returned by ListGroups");
      }
      const groups = await store.listGroups({ queue, afterKey, limit: limit + 1 });
      const page = groups.slice(0, limit);
      return create(ListGroupsResponseSchema, {
        groups: page.map(groupStatsToWire),
        nextPageToken: groups.length > limit ? encodePageToken(page.at(-1)!.groupKey, filter, "ListGroups") : "",
      });
    },

    // docs/api.md "Queue activity": the window ends with the current minute (the store's clock, the database's on
    // PostgreSQL); its samples and the counts its gauges are counted back from come from one read.
    async getQueueActivity(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      const { windowMs, stepMs } = v.activitySpan(req);
      requireQueue(ctx, "queue", queue);
      const window = activityWindow(clock.now(), windowMs, stepMs);
      const activity = await store.queueActivity(queue, window.startMinute);
      return create(GetQueueActivityResponseSchema, {
        points: activityPoints(activity, window).map(activityPointToWire),
        step: durationFromMs(stepMs),
      });
    },
  };
}

function ageMs(now: number, since: number | null): number {
  return since === null ? 0 : Math.max(0, now - since);
}
