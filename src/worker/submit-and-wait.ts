/**
 * A producer that waits for its job's end (docs/api.md "Workflows"):
 * Submit, then WaitJob for the new job. The server wakes the call when the
 * job ends, through whichever server it ends; nothing polls.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Job, SubmitRequestSchema } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { LeaseQueueClient } from "./client.js";

/** WaitJob's longest timeout. */
const MAX_WAIT_MS = 15 * 60 * 1000;

export interface SubmitAndWaitOptions extends CallOptions {
  /** How long to wait for the job's end, in milliseconds (default 30 s, at most 15 minutes). */
  waitMs?: number;
}

/** What submitAndWait answers: the job when it ended, or as it was when the wait timed out. */
export interface WaitedJob {
  job: Job;
  /** True when the job is COMPLETED, DEAD or CANCELLED. */
  finished: boolean;
}

/**
 * Submits `request` and waits for the job to end (COMPLETED, DEAD or
 * CANCELLED) for at most `waitMs`. Answers the job and whether it has ended
 * (at the timeout, the job as it is then and `finished: false`); a refused
 * Submit or WaitJob rejects with its ConnectError. A repeated idempotency
 * key waits for the original job.
 */
export async function submitAndWait(
  client: LeaseQueueClient,
  request: MessageInitShape<typeof SubmitRequestSchema>,
  options: SubmitAndWaitOptions = {},
): Promise<WaitedJob> {
  const { waitMs = 30_000, ...callOptions } = options;
  if (!Number.isFinite(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
    throw new RangeError(`submitAndWait: waitMs must be within 0..${MAX_WAIT_MS} (15 minutes), got ${String(waitMs)}`);
  }
  const submitted = await client.submit(request, callOptions);
  const timeout = { seconds: BigInt(Math.floor(waitMs / 1000)), nanos: (waitMs % 1000) * 1_000_000 };
  const answer = await client.waitJob({ jobId: submitted.job!.id, timeout }, callOptions);
  return { job: answer.job!, finished: answer.finished };
}
