/**
 * A producer that waits for its job's end (docs/api.md "Workflows"):
 * Submit, then WaitJob for the new job. The server wakes the call when the
 * job ends, through whichever server it ends; nothing polls.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { submitRequestInit, type JsonSubmitRequest, type LeaseQueueClient } from "./client.js";
import { valueToJson } from "./json-values.js";

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
  /** The job's result as plain JSON (`null` when it has none), as its handler returned it. */
  result: JsonValue;
}

/**
 * Submits `request` (its payload plain JSON or a Value) and waits for the job to end (COMPLETED, DEAD or
 * CANCELLED) for at most `waitMs`. Answers the job and whether it has ended
 * (at the timeout, the job as it is then and `finished: false`); a refused
 * Submit or WaitJob rejects with its ConnectError. A repeated idempotency
 * key waits for the original job.
 */
export async function submitAndWait(
  client: LeaseQueueClient,
  request: JsonSubmitRequest,
  options: SubmitAndWaitOptions = {},
): Promise<WaitedJob> {
  const { waitMs = 30_000, ...callOptions } = options;
  if (!Number.isFinite(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
    throw new RangeError(`submitAndWait: waitMs must be within 0..${MAX_WAIT_MS} (15 minutes), got ${String(waitMs)}`);
  }
  const submitted = await client.submit(submitRequestInit(request), callOptions);
  const timeout = { seconds: BigInt(Math.floor(waitMs / 1000)), nanos: (waitMs % 1000) * 1_000_000 };
  const answer = await client.waitJob({ jobId: submitted.job!.id, timeout }, callOptions);
  return { job: answer.job!, finished: answer.finished, result: valueToJson(answer.job!.result) };
}
