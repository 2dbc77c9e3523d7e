/**
 * leasequeue.v1.LeaseQueueService handlers: validate the request, ask the
 * store, map the answer to wire types. Errors thrown here are translated in
 * one interceptor (src/service/errors.ts via src/server/routes.ts).
 */
import { create, type UnknownField } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../domain/clock.js";
import { jobNotFound, QueueError } from "../domain/errors.js";
import { JOB_STATES, type JobState } from "../domain/job.js";
import { NO_QUEUE_LIMITS } from "../domain/queue-limits.js";
import type { ClaimStreams } from "../dispatch/claim-streams.js";
import type { EventFeed } from "../dispatch/event-feed.js";
import { claimWithin } from "../dispatch/long-poll-claim.js";
import type { QueueWakeups } from "../dispatch/queue-wakeups.js";
import type { Scheduler } from "../dispatch/scheduler.js";
import { releaseUnsent as releaseLeases } from "../dispatch/unsent-leases.js";
import type { Logger } from "../logger.js";
import { purgeQueue, redriveAll } from "../store/bulk-transitions.js";
import type { ClaimedLease, QueueCounts, Store, SubmitOutcome } from "../store/store.js";
import {
  ClaimResponseSchema,
  GetStatsResponseSchema,
  StreamClaimsResponseSchema,
  SubmitBatchResponseSchema,
  LeaseQueueService,
  type SubmitRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ackResultToWire, applyAcknowledgements, parseAcknowledgements } from "./acknowledgements.js";
import { invalidArgument } from "./errors.js";
import { refusedJobs, requireJobQueue, requireQueue, requireQueueFilter, requireScheduleQueue, visibleQueues } from "./queue-access.js";
import { deliverableLeases, wireFormatOf, withLeases, type WireLease } from "./lease-delivery.js";
import { asField, encodeSubmitResponse } from "./lease-encoding.js";
import * as v from "./validate.js";
import {
  KEEPALIVE_RESPONSE,
  SLOW_SUBSCRIBER_GRACE_MS,
  WATCH_OUTPUT,
  watchFrames,
  watchResponseOf,
  watchWireFormat,
} from "./watch-output.js";
import { eventToWire, jobToWire, queueConfigToWire, scheduleToWire, statsToWire } from "./wire.js";
import { workStream } from "./work-stream.js";

/** The HTTP / gRPC metadata header that may carry a Submit's idempotency key. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

export interface LeaseQueueServiceOptions {
  store: Store;
  clock: Clock;
  wakeups: QueueWakeups;
  claimStreams: ClaimStreams;
  /** Serves WatchEvents. */
  events: EventFeed;
  /** Told when a schedule is created, replaced or deleted, so its timer follows at once. Default: nobody. */
  scheduler?: Pick<Scheduler, "rearm">;
  /** Told about every submit answered from an existing job. */
  onIdempotentReplay?: (queue: string) => void;
  /** Idle interval between Work keepalive messages. Default 15 s. */
  workKeepaliveMs?: number;
  /** Where leases that could not be delivered, and operators' queue controls, are reported. Default: nowhere. */
  log?: Logger;
}

export function createLeaseQueueService(opts: LeaseQueueServiceOptions): ServiceImpl<typeof LeaseQueueService> {
  const { store, clock, wakeups } = opts;
  const longPoll = { store, wakeups, clock, log: opts.log };

  function replayed(outcomes: SubmitOutcome[]): SubmitOutcome[] {
    for (const o of outcomes) if (o.deduplicated) opts.onIdempotentReplay?.(o.job.queue);
    return outcomes;
  }

  function submitOutcome(o: SubmitOutcome, basic = false) {
    return { job: jobToWire(o.job, basic), deduplicated: o.deduplicated };
  }

  const deliverable = (leases: ClaimedLease[], ctx: HandlerContext): Promise<WireLease[]> =>
    deliverableLeases(store, opts.log, leases, wireFormatOf(ctx.requestHeader.get("content-type")));
  const releaseUnsent = (leases: ClaimedLease[]): Promise<void> => releaseLeases(store, opts.log, leases);

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

  function headerKey(ctx: HandlerContext): string | undefined {
    const value = ctx.requestHeader.get(IDEMPOTENCY_KEY_HEADER);
    return value === null ? undefined : value;
  }

  return {
    async submit(req, ctx) {
      const spec = v.newJob(req, clock.now(), "", headerKey(ctx));
      requireQueue(ctx, "queue", spec.queue);
      const [outcome] = replayed(await store.submit([spec]));
      return submitOutcome(outcome);
    },

    async submitBatch(req, ctx) {
      if (headerKey(ctx) !== undefined) {
        throw invalidArgument("Idempotency-Key", "is not accepted on SubmitBatch; set idempotency_key on each job");
      }
      if (req.jobs.length === 0) throw invalidArgument("jobs", "must contain at least one job");
      if (req.jobs.length > v.BOUNDS.batchJobs) {
        throw invalidArgument("jobs", `must contain at most ${v.BOUNDS.batchJobs} jobs`);
      }
      const basic = v.basicView("view", req.view);
      const now = clock.now();
      const specs = req.jobs.map((job: SubmitRequest, i: number) => v.newJob(job, now, `jobs[${i}].`));
      specs.forEach((spec, i) => requireQueue(ctx, `jobs[${i}].queue`, spec.queue));
      const outcomes = replayed(await store.submit(specs));
      if (wireFormatOf(ctx.requestHeader.get("content-type")) === "binary") {
        const encoded = encodedSubmitBatch(outcomes, basic);
        if (encoded !== undefined) return encoded;
      }
      return { results: outcomes.map((o) => submitOutcome(o, basic)) };
    },

    async claim(req, ctx) {
      const spec = v.claimSpec(req);
      requireQueue(ctx, "queue", spec.queue);
      const leases = await claimWithin(longPoll, spec, ctx.signal, (claimed) => deliverable(claimed, ctx));
      return claimResponse(leases);
    },

    async *streamClaims(req, ctx) {
      const spec = v.claimStreamSpec("", req);
      requireQueue(ctx, "queue", spec.queue);
      for await (const claimed of opts.claimStreams.open(spec, ctx.signal)) {
        if (claimed === null) {
          yield {};
          continue;
        }
        // One lease a worker cannot decode must not break the stream for its
        // neighbours: it is dead-lettered and never sent (its finished event
        // frees its place in max_in_flight).
        const [lease] = await deliverable([claimed], ctx);
        if (ctx.signal.aborted) {
          // The stream ended while the lease was checked: it was never sent.
          await releaseUnsent(lease === undefined ? [] : [claimed]);
          break;
        }
        if (lease !== undefined) {
          const response = create(StreamClaimsResponseSchema, {});
          yield withLeases(response, [lease], (l) => (response.lease = l));
        }
      }
      // Ended by the server (shutdown: unavailable) or the client (nobody listens).
      if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason);
    },

    async heartbeat(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const token = v.leaseToken("lease_token", req.leaseToken);
      const duration = v.durationInRange("lease_duration", req.leaseDuration, v.BOUNDS.leaseDurationMs);
      const progress = v.progressJsonText("progress", req.progress);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.heartbeat(jobId, token, duration, progress)) };
    },

    async complete(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const token = v.leaseToken("lease_token", req.leaseToken);
      const result = v.optionalJsonText("result", req.result);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.complete(jobId, token, result)) };
    },

    async fail(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const token = v.leaseToken("lease_token", req.leaseToken);
      const failure = v.failure("", req);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.fail(jobId, token, failure)) };
    },

    async release(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const token = v.leaseToken("lease_token", req.leaseToken);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.release(jobId, token)) };
    },

    async snooze(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const token = v.leaseToken("lease_token", req.leaseToken);
      const delayMs = v.snoozeDelayMs("delay", req.delay);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.snooze(jobId, token, delayMs)) };
    },

    async acknowledge(req, ctx) {
      const acks = parseAcknowledgements("acks", req.acks, 1);
      const refused = await refusedJobs(
        ctx,
        store,
        "acks",
        acks.map((a) => a.jobId),
      );
      const outcomes = await applyAcknowledgements(store, acks, refused);
      return { results: outcomes.map(ackResultToWire) };
    },

    work(requests, ctx) {
      return workStream(requests, ctx, {
        store,
        log: opts.log,
        claimStreams: opts.claimStreams,
        keepaliveMs: opts.workKeepaliveMs ?? 15_000,
      });
    },

    async redrive(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.redrive(jobId)) };
    },

    async cancel(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const reason = v.text("reason", req.reason);
      await requireJobQueue(ctx, store, "job_id", jobId);
      return { job: jobToWire(await store.cancel(jobId, reason)) };
    },

    // Queue controls (api.md section B). Pause and resume are queue-level
    // changes, not job events: they are logged here and announced by the
    // store beside the events of their commit.
    async pauseQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      if (await store.pauseQueue(queue)) opts.log?.info("queue paused", { queue });
      return { stats: await statsOfQueue(queue) };
    },

    async resumeQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      if (await store.resumeQueue(queue)) opts.log?.info("queue resumed", { queue });
      return { stats: await statsOfQueue(queue) };
    },

    // Queue limits (api.md section D): the store applies the mask in one
    // transaction and announces the change, so held-back claimers wake.
    async updateQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      const update = v.queueConfigUpdate(req);
      requireQueue(ctx, "queue", queue);
      const config = await store.updateQueueConfig(queue, update);
      opts.log?.info("queue limits set", { queue, fields: update.fields, ...config });
      return { config: queueConfigToWire(config) };
    },

    async redriveAll(req, ctx) {
      const spec = {
        queue: v.queueName("queue", req.queue),
        task: v.optionalName("task", req.task),
        limit: v.limitOrAll("limit", req.limit),
      };
      requireQueue(ctx, "queue", spec.queue);
      const redriven = await redriveAll(store, spec, { signal: ctx.signal });
      opts.log?.info("dead jobs redriven", { ...spec, redriven });
      return { redriven: BigInt(redriven) };
    },

    async purgeQueue(req, ctx) {
      const queue = v.queueName("queue", req.queue);
      requireQueue(ctx, "queue", queue);
      v.purgeConfirmation("confirm", req.confirm, queue);
      const cancelled = await purgeQueue(store, queue, { signal: ctx.signal });
      opts.log?.info("queue purged", { queue, cancelled });
      return { cancelled: BigInt(cancelled) };
    },

    // Schedules (api.md section D). The template's queue is checked as a
    // Submit's would be; replacing or deleting a schedule also needs the
    // queue of the schedule that is there.
    async createSchedule(req, ctx) {
      const spec = v.scheduleSpec("schedule.", req.schedule, clock.now());
      requireQueue(ctx, "schedule.template.queue", spec.template.queue);
      await requireScheduleQueue(ctx, store, "schedule.name", spec.name);
      const stored = await store.createSchedule(spec);
      opts.scheduler?.rearm();
      opts.log?.info("schedule saved", {
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
      await requireScheduleQueue(ctx, store, "name", name);
      await store.deleteSchedule(name);
      opts.scheduler?.rearm();
      opts.log?.info("schedule deleted", { schedule: name });
      return {};
    },

    async getJob(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, "job_id", jobId);
      const job = await store.getJob(jobId);
      if (job === undefined) throw jobNotFound(jobId);
      return { job: jobToWire(job) };
    },

    async listJobs(req, ctx) {
      const queue = req.queue === "" ? undefined : v.queueName("queue", req.queue);
      const states = v.jobStates("states", req.states);
      const limit = v.intInRange("page_size", req.pageSize, v.BOUNDS.pageSize, v.DEFAULTS.pageSize);
      const basic = v.basicView("view", req.view);
      requireQueueFilter(ctx, "queue", queue);
      const filter = filterKey(queue, states);
      const beforeId = req.pageToken === "" ? undefined : decodePageToken(req.pageToken, filter);
      const jobs = await store.listJobs({ queue, states: states.length > 0 ? states : undefined, limit: limit + 1, beforeId });
      const page = jobs.slice(0, limit);
      const more = jobs.length > limit;
      return {
        jobs: page.map((job) => jobToWire(job, basic)),
        nextPageToken: more ? encodePageToken(page.at(-1)!.id, filter) : "",
      };
    },

    async listJobEvents(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, "job_id", jobId);
      const events = await store.listJobEvents(jobId);
      if (events.length === 0 && (await store.getJob(jobId)) === undefined) throw jobNotFound(jobId);
      return { events: events.map(eventToWire) };
    },

    async getStats(_req, ctx) {
      const now = clock.now();
      const queues = visibleQueues(ctx, await store.queueCounts());
      const total = { queued: 0, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0 };
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

    async *watchEvents(req, ctx) {
      let afterSequence: number | undefined;
      if (req.afterSequence !== undefined) {
        if (req.afterSequence < 0n) throw invalidArgument("after_sequence", "must not be negative");
        // Anything past 2^53 is past every sequence ever issued: out_of_range below.
        afterSequence = Number(req.afterSequence > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : req.afterSequence);
      }
      const spec = {
        queue: req.queue === "" ? undefined : v.queueName("queue", req.queue),
        jobId: req.jobId === "" ? undefined : v.jobId("job_id", req.jobId),
        afterSequence,
      };
      requireQueueFilter(ctx, "queue", spec.queue);
      // The first message is a keepalive, produced once the subscription is
      // registered: it makes the transport send the response headers. After
      // it, with a WatchOutput, every batch of waiting events goes out as
      // shared pre-encoded frames in one write (see watch-output.ts).
      const format = watchWireFormat(ctx.requestHeader.get("content-type"));
      const output = format === undefined ? undefined : ctx.values.get(WATCH_OUTPUT);
      let headersSent = false;
      try {
        for await (const batch of opts.events.watchBatches(spec, ctx.signal, { output })) {
          if (output !== undefined && headersSent) {
            output.write(watchFrames(batch, format!));
            const writable = output.whenWritable();
            if (writable !== undefined) await untilSettledOrAborted(writable, ctx.signal);
            continue;
          }
          if (batch === null) yield KEEPALIVE_RESPONSE;
          else for (const event of batch) yield watchResponseOf(event);
          headersSent = true;
        }
      } catch (err) {
        if (err instanceof QueueError && err.reason === "SUBSCRIBER_TOO_SLOW") output?.closeAfter(SLOW_SUBSCRIBER_GRACE_MS);
        throw err;
      }
      // Ended by the client (nobody listens), a deadline, or shutdown (unavailable).
      if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason);
      throw new ConnectError("the server is shutting down", Code.Unavailable);
    },
  };
}

/**
 * SubmitBatch's response for a binary client, its results encoded by hand
 * (lease-encoding.ts) and carried as unknown fields, which protobuf-es
 * writes verbatim: the bytes toBinary would write for the result messages.
 * Undefined when a job cannot be encoded that way (a stored JSON value it
 * cannot read); the caller then builds messages, for every result, so that
 * they stay in request order.
 */
function encodedSubmitBatch(outcomes: SubmitOutcome[], basic: boolean) {
  const response = create(SubmitBatchResponseSchema, {});
  const fields: UnknownField[] = [];
  try {
    for (const o of outcomes) fields.push(asField(1, encodeSubmitResponse(o.job, o.deduplicated, basic)));
  } catch {
    return undefined;
  }
  response.$unknown = fields;
  return response;
}

function claimResponse(leases: WireLease[]) {
  if (leases.length === 0) return { leases: [] };
  const response = create(ClaimResponseSchema, {});
  return withLeases(response, leases, (lease) => response.leases.push(lease));
}

/** Waits for `promise`, or until `signal` aborts (then the caller sees the abort itself). */
async function untilSettledOrAborted(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  let onAbort: (() => void) | undefined;
  try {
    const aborted = new Promise<void>((resolve) => signal.addEventListener("abort", (onAbort = () => resolve()), { once: true }));
    await Promise.race([promise, aborted]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
  }
}

function ageMs(now: number, since: number | null): number {
  return since === null ? 0 : Math.max(0, now - since);
}

function filterKey(queue: string | undefined, states: JobState[]): string {
  return JSON.stringify([queue ?? "", [...states].sort()]);
}

/** Page tokens are opaque (AIP-158): the last id seen, bound to the filter that produced it. */
function encodePageToken(lastId: string, filter: string): string {
  return Buffer.from(JSON.stringify({ b: lastId, f: filter })).toString("base64url");
}

function decodePageToken(token: string, filter: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw invalidArgument("page_token", "is not a token returned by ListJobs");
  }
  const { b, f } = (parsed ?? {}) as { b?: unknown; f?: unknown };
  if (typeof b !== "string" || typeof f !== "string") {
    throw invalidArgument("page_token", "is not a token returned by ListJobs");
  }
  if (f !== filter) throw invalidArgument("page_token", "was issued for a different queue or states filter");
  return b;
}
