/**
 * WaitJob (docs/api.md "Workflows"): answers once the job is COMPLETED,
 * DEAD or CANCELLED (at once if it already is), or at the timeout with the
 * job as it is then and `finished: false`. The wait is registered before
 * the job is read (dispatch/job-waiters.ts), so an end committed in between
 * is never missed; the answer is always read from the store, never carried
 * by the announcement. A job that no longer exists when the wait ends
 * (pruned, purged) is not_found.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { JobWaiters } from "../dispatch/job-waiters.js";
import { jobNotFound } from "../domain/errors.js";
import { hasEnded, type Job } from "../domain/job.js";
import type { Store } from "../store/store.js";
import type { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { requireJobQueue } from "./queue-access.js";
import * as v from "./validate.js";
import { jobToWire } from "./wire.js";

export interface WaitJobHandlerDeps {
  store: Store;
  jobWaiters: JobWaiters;
}

export function waitJobHandler({ store, jobWaiters }: WaitJobHandlerDeps): Pick<ServiceImpl<typeof LeaseQueueService>, "waitJob"> {
  const answer = (jobId: string, job: Job | undefined) => {
    if (job === undefined) throw jobNotFound(jobId);
    return { job: jobToWire(job), finished: hasEnded(job.state) };
  };
  return {
    async waitJob(req, ctx) {
      const jobId = v.jobId("job_id", req.jobId);
      const timeoutMs = v.durationInRange("timeout", req.timeout, v.BOUNDS.waitJobTimeoutMs, v.DEFAULTS.waitJobTimeoutMs)!;
      await requireJobQueue(ctx, store, jobId);
      const wait = jobWaiters.register(jobId, timeoutMs, ctx.signal);
      let job: Job | undefined;
      try {
        job = await store.getJob(jobId);
      } catch (err) {
        wait.cancel();
        throw err;
      }
      if (job === undefined || hasEnded(job.state) || timeoutMs === 0) {
        wait.cancel();
        return answer(jobId, job);
      }
      await wait.ended;
      ctx.signal.throwIfAborted();
      return answer(jobId, await store.getJob(jobId));
    },
  };
}
