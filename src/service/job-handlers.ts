/**
 * The job RPCs of leasequeue.v1.LeaseQueueService: Submit, SubmitBatch,
 * GetJob, ListJobs, ListJobEvents, Redrive and Cancel. Each validates the
 * request, checks the caller may use the queue (queue-access.ts), asks the
 * store and maps the answer to wire types.
 */
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../domain/clock.js";
import { jobNotFound } from "../domain/errors.js";
import type { ProducerSpans } from "../domain/producer-spans.js";
import type { NewJob } from "../domain/submission.js";
import type { Store, SubmitOutcome } from "../store/store.js";
import type { LeaseQueueService, SubmitRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { encodedSubmitBatch } from "./encoded-responses.js";
import { invalidArgument } from "./errors.js";
import { encodersFor, type HandEncoders } from "./hand-wire.js";
import { decodePageToken, encodePageToken, listFilterKey } from "./page-token.js";
import { requireDependencyQueues, requireJobQueue, requireQueue, requireQueueFilter } from "./queue-access.js";
import { traceSubmission } from "./submit-tracing.js";
import * as v from "./validate.js";
import { eventToWire, jobToWire } from "./wire.js";

/** The HTTP / gRPC metadata header that may carry a Submit's idempotency key. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

export interface JobHandlerDeps {
  store: Store;
  clock: Clock;
  /** Told about every submit answered from an existing job. */
  onIdempotentReplay?: (queue: string) => void;
  /** The PRODUCER span of each submitted job (docs/operations.md "Tracing"); undefined when the server does not trace. */
  producerSpans?: ProducerSpans;
  /** SubmitBatch's answer encoded by hand for binary clients (hand-wire.ts; LEASEQUEUE_WIRE=fast); absent: as messages. */
  handEncoders?: HandEncoders;
}

type JobHandlers = Pick<
  ServiceImpl<typeof LeaseQueueService>,
  "submit" | "submitBatch" | "getJob" | "listJobs" | "listJobEvents" | "redrive" | "cancel"
>;

export function jobHandlers({ store, clock, onIdempotentReplay, producerSpans, handEncoders }: JobHandlerDeps): JobHandlers {
  function replayed(outcomes: SubmitOutcome[]): SubmitOutcome[] {
    for (const o of outcomes) if (o.deduplicated) onIdempotentReplay?.(o.job.queue);
    return outcomes;
  }

  /** Stores the jobs, each with its trace context (docs/api.md "Trace context"), and ends their PRODUCER spans. */
  async function submitTraced(specs: NewJob[], ctx: HandlerContext): Promise<SubmitOutcome[]> {
    const traced = traceSubmission(specs, ctx, producerSpans);
    let outcomes: SubmitOutcome[];
    try {
      outcomes = await store.submit(traced.specs);
    } catch (err) {
      traced.refused(err);
      throw err;
    }
    traced.stored(outcomes);
    return replayed(outcomes);
  }

  return {
    async submit(req, ctx) {
      const spec = v.newJob(req, clock.now(), "", headerKey(ctx));
      v.resolveRefs([req], [spec], false);
      requireQueue(ctx, "queue", spec.queue);
      await requireDependencyQueues(ctx, store, [spec]);
      const [outcome] = await submitTraced([spec], ctx);
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
      v.resolveRefs(req.jobs, specs, true);
      specs.forEach((spec, i) => requireQueue(ctx, `jobs[${i}].queue`, spec.queue));
      await requireDependencyQueues(ctx, store, specs);
      const outcomes = await submitTraced(specs, ctx);
      const encoders = encodersFor(ctx.requestHeader.get("content-type"), handEncoders);
      if (encoders !== undefined) {
        const encoded = encodedSubmitBatch(outcomes, basic, encoders);
        if (encoded !== undefined) return encoded;
      }
      return { results: outcomes.map((o) => submitOutcome(o, basic)) };
    },

    async getJob(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, jobId);
      const job = await store.getJob(jobId);
      if (job === undefined) throw jobNotFound(jobId);
      return { job: jobToWire(job) };
    },

    async listJobs(req, ctx) {
      const queue = req.queue === "" ? undefined : v.queueName("queue", req.queue);
      const states = v.jobStates("states", req.states);
      const limit = v.intInRange("page_size", req.pageSize, v.BOUNDS.pageSize, v.DEFAULTS.pageSize);
      const basic = v.basicView("view", req.view);
      const groupKey = v.groupKey("group_key", req.groupKey);
      const related = {
        dependenciesOf: req.dependenciesOf === "" ? undefined : v.jobId("dependencies_of", req.dependenciesOf),
        dependentsOf: req.dependentsOf === "" ? undefined : v.jobId("dependents_of", req.dependentsOf),
      };
      requireQueueFilter(ctx, "queue", queue);
      const filter = listFilterKey(queue, states, groupKey, related);
      const beforeId = req.pageToken === "" ? undefined : decodePageToken(req.pageToken, filter);
      const jobs = await store.listJobs({
        queue,
        states: states.length > 0 ? states : undefined,
        groupKey: groupKey === "" ? undefined : groupKey,
        limit: limit + 1,
        beforeId,
        ...related,
      });
      const page = jobs.slice(0, limit);
      const more = jobs.length > limit;
      return {
        jobs: page.map((job) => jobToWire(job, basic)),
        nextPageToken: more ? encodePageToken(page.at(-1)!.id, filter) : "",
      };
    },

    async listJobEvents(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, jobId);
      const events = await store.listJobEvents(jobId);
      if (events.length === 0 && (await store.getJob(jobId)) === undefined) throw jobNotFound(jobId);
      return { events: events.map(eventToWire) };
    },

    async redrive(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      await requireJobQueue(ctx, store, jobId);
      return { job: jobToWire(await store.redrive(jobId)) };
    },

    async cancel(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const reason = v.text("reason", req.reason);
      await requireJobQueue(ctx, store, jobId);
      return { job: jobToWire(await store.cancel(jobId, reason, req.includeRunning)) };
    },
  };
}

function headerKey(ctx: HandlerContext): string | undefined {
  const value = ctx.requestHeader.get(IDEMPOTENCY_KEY_HEADER);
  return value === null ? undefined : value;
}

function submitOutcome(o: SubmitOutcome, basic = false) {
  return { job: jobToWire(o.job, basic), deduplicated: o.deduplicated };
}
