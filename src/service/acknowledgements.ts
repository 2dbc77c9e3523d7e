/**
 * Acknowledgements (docs/api.md "The batched path: Acknowledge and Work",
 * "Claim with acks" and "Snooze and progress"): the batched form of
 * Complete, Fail, Heartbeat (with its progress), Release and Snooze used by
 * the Acknowledge RPC, the Work stream and a Claim carrying acks.
 */
import { create } from "@bufbuild/protobuf";
import { anyPack, AnySchema, timestampFromMs, type Any } from "@bufbuild/protobuf/wkt";
import type { ConnectError, HandlerContext } from "@connectrpc/connect";
import { QueueError } from "../domain/errors.js";
import type { Job } from "../domain/job.js";
import type { Store } from "../store/store.js";
import { StatusSchema, type Status } from "../../gen/ts/google/rpc/status_pb.js";
import { AcknowledgementResultSchema, type Acknowledgement, type AcknowledgementResult } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { invalidArgument, toConnectError } from "./errors.js";
import { decodedJsonOf } from "./hand-wire.js";
import { refusedJobs } from "./queue-access.js";
import * as v from "./validate.js";

/** One validated acknowledgement. */
export type AckSpec = { jobId: string; leaseToken: string } & (
  | { outcome: "complete"; resultJson: string | null }
  | { outcome: "fail"; failure: v.Failure }
  | { outcome: "heartbeat"; leaseDurationMs: number | undefined; progressJson: string | undefined }
  | { outcome: "release" }
  | { outcome: "snooze"; delayMs: number }
);

/** What applying one acknowledgement did: the job after it, or the refusal. */
export type AckOutcome = { jobId: string } & ({ ok: true; job: Job } | { ok: false; error: ConnectError });

/**
 * Validates `acks` (the repeated field `field` of a request), at least `min`
 * and at most 1000 (docs/api.md "Bounds"). Throws invalid_argument for the first bad one.
 *
 * A malformed acknowledgement (bad id, missing token or outcome, a field
 * out of bounds) fails the whole request with invalid_argument naming its
 * index, e.g. `acks[3].job_id`: nothing of that request is applied.
 */
export function parseAcknowledgements(field: string, acks: Acknowledgement[], min: number): AckSpec[] {
  if (acks.length < min) throw invalidArgument(field, `must contain at least ${min} acknowledgement`);
  if (acks.length > v.BOUNDS.acks) throw invalidArgument(field, `must contain at most ${v.BOUNDS.acks} acknowledgements`);
  return acks.map((ack, i) => parseAcknowledgement(`${field}[${i}].`, ack));
}

function parseAcknowledgement(path: string, ack: Acknowledgement): AckSpec {
  const jobId = v.jobId(`${path}job_id`, ack.jobId);
  const leaseToken = v.leaseToken(`${path}lease_token`, ack.leaseToken);
  const o = ack.outcome;
  switch (o.case) {
    case "complete":
      return {
        jobId,
        leaseToken,
        outcome: "complete",
        resultJson: v.optionalJsonText(`${path}complete.result`, o.value.result, decodedJsonOf(o.value)),
      };
    case "fail":
      return { jobId, leaseToken, outcome: "fail", failure: v.failure(`${path}fail.`, o.value) };
    case "heartbeat":
      return {
        jobId,
        leaseToken,
        outcome: "heartbeat",
        leaseDurationMs: v.durationInRange(`${path}heartbeat.lease_duration`, o.value.leaseDuration, v.BOUNDS.leaseDurationMs),
        progressJson: v.progressJsonText(`${path}heartbeat.progress`, o.value.progress, decodedJsonOf(o.value)),
      };
    case "release":
      return { jobId, leaseToken, outcome: "release" };
    case "snooze":
      return { jobId, leaseToken, outcome: "snooze", delayMs: v.snoozeDelayMs(`${path}snooze.delay`, o.value.delay) };
    default:
      throw invalidArgument(`${path}outcome`, "is required: one of complete, fail, heartbeat, release or snooze");
  }
}

/** The store call of one acknowledgement: the same call the single RPC makes. */
function applyOne(store: Store, ack: AckSpec): Promise<Job> {
  switch (ack.outcome) {
    case "complete":
      return store.complete(ack.jobId, ack.leaseToken, ack.resultJson);
    case "fail":
      return store.fail(ack.jobId, ack.leaseToken, ack.failure);
    case "heartbeat":
      return store.heartbeat(ack.jobId, ack.leaseToken, ack.leaseDurationMs, ack.progressJson);
    case "release":
      return store.release(ack.jobId, ack.leaseToken);
    case "snooze":
      return store.snooze(ack.jobId, ack.leaseToken, ack.delayMs);
  }
}

/**
 * Applies every acknowledgement, in order, sharing the store's group commit.
 * Resolves once each is committed or refused; a refusal is an outcome, not a
 * rejection. Anything that is not a refusal (a bug) rejects, so that the
 * caller's boundary reports it instead of hiding it in one result.
 * `refused[i]`, when set, refuses acknowledgement i without applying it (a
 * job the caller may not see, answered as a job that does not exist:
 * queue-access.ts).
 *
 * Well-formed acknowledgements are independent. Each becomes its own store
 * call, all issued in the same turn of the event loop, so group commit
 * applies them in request order inside one transaction, each in its own
 * savepoint: a refused one (stale token, expired lease, unknown job) rolls
 * back alone and is answered with exactly the code, message and ErrorInfo
 * the single RPC would have returned.
 */
export async function applyAcknowledgements(
  store: Store,
  acks: AckSpec[],
  refused?: readonly (ConnectError | undefined)[],
): Promise<AckOutcome[]> {
  // Issued synchronously, one after the other: the store queues them in this
  // order and commits them together.
  const settled = await Promise.allSettled(
    acks.map((ack, i) => (refused?.[i] !== undefined ? Promise.resolve(undefined) : applyOne(store, ack))),
  );
  return settled.map((s, i): AckOutcome => {
    const jobId = acks[i].jobId;
    const refusal = refused?.[i];
    if (refusal !== undefined) return { jobId, ok: false, error: refusal };
    if (s.status === "fulfilled") return { jobId, ok: true, job: s.value! };
    if (!(s.reason instanceof QueueError)) throw s.reason;
    return { jobId, ok: false, error: toConnectError(s.reason) };
  });
}

/**
 * A unary call's acknowledgements (Acknowledge, and Claim's `acks`): each
 * job's queue checked against the caller's (queue-access.ts), then every
 * acknowledgement applied; resolves with the results in request order once
 * each is committed or refused.
 */
export async function acknowledgeForCaller(ctx: HandlerContext, store: Store, acks: AckSpec[]): Promise<AcknowledgementResult[]> {
  if (acks.length === 0) return [];
  const refused = await refusedJobs(
    ctx,
    store,
    acks.map((a) => a.jobId),
  );
  const outcomes = await applyAcknowledgements(store, acks, refused);
  return outcomes.map(ackResultToWire);
}

/** An outcome as the wire's AcknowledgementResult. */
export function ackResultToWire(outcome: AckOutcome): AcknowledgementResult {
  if (!outcome.ok) {
    return create(AcknowledgementResultSchema, { jobId: outcome.jobId, status: statusOf(outcome.error) });
  }
  const { job } = outcome;
  return create(AcknowledgementResultSchema, {
    jobId: outcome.jobId,
    status: create(StatusSchema, { code: 0 }),
    leaseExpireTime: job.state === "running" && job.leaseExpireTime !== null ? timestampFromMs(job.leaseExpireTime) : undefined,
  });
}

/** google.rpc.Status of an error: what grpc-status-details-bin would carry for it. */
function statusOf(error: ConnectError): Status {
  const details: Any[] = error.details.map((d) =>
    "desc" in d
      ? anyPack(d.desc, create(d.desc, d.value))
      : create(AnySchema, { typeUrl: `type.googleapis.com/${d.type}`, value: d.value }),
  );
  return create(StatusSchema, { code: error.code, message: error.rawMessage, details });
}
