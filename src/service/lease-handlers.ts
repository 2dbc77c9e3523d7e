/**
 * The lease RPCs of leasequeue.v1.LeaseQueueService: the claims (Claim,
 * StreamClaims, and the Work stream in work-handler.ts), the calls of a
 * lease's holder (Heartbeat, Complete, Fail, Release, Snooze), and
 * Acknowledge. A holder's call names the job and its lease token; the store
 * refuses a token that no longer holds the lease.
 */
import { create } from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../domain/clock.js";
import { KEEPALIVE_INTERVAL_MS } from "../domain/timing-defaults.js";
import type { ClaimStreams } from "../dispatch/claim-streams.js";
import { claimWithin } from "../dispatch/long-poll-claim.js";
import type { QueueWakeups } from "../dispatch/queue-wakeups.js";
import { releaseUnsent } from "../dispatch/unsent-leases.js";
import type { Logger } from "../logger.js";
import type { ClaimedLease, Store } from "../store/store.js";
import { StreamClaimsResponseSchema, type LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { acknowledgeForCaller, parseAcknowledgements } from "./acknowledgements.js";
import { claimResponse } from "./encoded-responses.js";
import { encodersFor, type HandEncoders } from "./hand-wire.js";
import { deliverableLeases, withLeases, type WireLease } from "./lease-delivery.js";
import { requireJobQueue, requireQueue } from "./queue-access.js";
import * as v from "./validate.js";
import { jobToWire } from "./wire.js";
import { workStream } from "./work-handler.js";

export interface LeaseHandlerDeps {
  store: Store;
  clock: Clock;
  wakeups: QueueWakeups;
  claimStreams: ClaimStreams;
  /** Idle interval between Work keepalive messages. Default 15 s. */
  workKeepaliveMs?: number;
  /** Where leases that could not be delivered are reported. Default: nowhere. */
  log?: Logger;
  /** Leases encoded by hand for binary clients (hand-wire.ts; LEASEQUEUE_WIRE=fast); absent: as messages. */
  handEncoders?: HandEncoders;
}

type LeaseHandlers = Pick<
  ServiceImpl<typeof LeaseQueueService>,
  "claim" | "streamClaims" | "work" | "heartbeat" | "complete" | "fail" | "release" | "snooze" | "acknowledge"
>;

/** A holder's request: the job it names and the lease token it presents. */
interface HolderRequest {
  jobId: string;
  leaseToken: string;
}

export function leaseHandlers({
  store,
  clock,
  wakeups,
  claimStreams,
  workKeepaliveMs,
  log,
  handEncoders,
}: LeaseHandlerDeps): LeaseHandlers {
  const longPoll = { store, wakeups, clock, log };

  /** The hand encoders for a call's answers, when it has a binary client (hand-wire.ts); decided once per call. */
  const encodersOf = (ctx: HandlerContext) => encodersFor(ctx.requestHeader.get("content-type"), handEncoders);

  /** The leases of `claimed` a client can decode, in the call's encoding (lease-delivery.ts). */
  const deliverable = (claimed: ClaimedLease[], encoders: HandEncoders | undefined): Promise<WireLease[]> =>
    deliverableLeases(store, log, claimed, encoders);

  /**
   * The opening of every holder's call: `job_id` and `lease_token`, then the
   * call's own fields (`fields`), then whether the caller may use the job's
   * queue (which reads the job, so it comes after everything the request
   * alone can refuse).
   */
  async function openHolderCall<T = undefined>(
    ctx: HandlerContext,
    req: HolderRequest,
    fields?: () => T,
  ): Promise<{ jobId: string; token: string; fields: T }> {
    const jobId = v.jobId("job_id", req.jobId);
    const token = v.leaseToken("lease_token", req.leaseToken);
    const own = fields?.() as T;
    await requireJobQueue(ctx, store, jobId);
    return { jobId, token, fields: own };
  }

  return {
    // The acks of a Claim (docs/api.md "Claim with acks") are applied and
    // committed first, exactly as Acknowledge applies them; only then are
    // leases chosen, and only then does a long-poll wait, so the wait never
    // holds an acknowledgement back.
    async claim(req, ctx) {
      const spec = v.claimSpec(req);
      const acks = parseAcknowledgements("acks", req.acks, 0);
      requireQueue(ctx, "queue", spec.queue);
      const results = await acknowledgeForCaller(ctx, store, acks);
      const encoders = encodersOf(ctx);
      const leases = await claimWithin(longPoll, spec, ctx.signal, (claimed) => deliverable(claimed, encoders));
      return claimResponse(leases, results, encoders);
    },

    async *streamClaims(req, ctx) {
      const spec = v.claimStreamSpec("", req);
      requireQueue(ctx, "queue", spec.queue);
      const encoders = encodersOf(ctx);
      for await (const claimed of claimStreams.open(spec, ctx.signal)) {
        if (claimed === null) {
          yield {};
          continue;
        }
        if ("cancelledJobId" in claimed) {
          // A job of this stream cancelled while running: the worker stops its handler.
          yield { cancelledJobId: claimed.cancelledJobId };
          continue;
        }
        // One lease a worker cannot decode must not break the stream for its
        // neighbours: it is dead-lettered and never sent (its finished event
        // frees its place in max_in_flight).
        const [lease] = await deliverable([claimed], encoders);
        if (ctx.signal.aborted) {
          // The stream ended while the lease was checked: it was never sent.
          await releaseUnsent(store, log, lease === undefined ? [] : [claimed]);
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

    work(requests, ctx) {
      return workStream(requests, ctx, { store, log, claimStreams, keepaliveMs: workKeepaliveMs ?? KEEPALIVE_INTERVAL_MS, handEncoders });
    },

    async heartbeat(req, ctx) {
      const { jobId, token, fields } = await openHolderCall(ctx, req, () => ({
        duration: v.durationInRange("lease_duration", req.leaseDuration, v.BOUNDS.leaseDurationMs),
        progress: v.progressJsonText("progress", req.progress),
      }));
      return { job: jobToWire(await store.heartbeat(jobId, token, fields.duration, fields.progress)) };
    },

    async complete(req, ctx) {
      const { jobId, token, fields: result } = await openHolderCall(ctx, req, () => v.optionalJsonText("result", req.result));
      return { job: jobToWire(await store.complete(jobId, token, result)) };
    },

    async fail(req, ctx) {
      const { jobId, token, fields: failure } = await openHolderCall(ctx, req, () => v.failure("", req));
      return { job: jobToWire(await store.fail(jobId, token, failure)) };
    },

    async release(req, ctx) {
      const { jobId, token } = await openHolderCall(ctx, req);
      return { job: jobToWire(await store.release(jobId, token)) };
    },

    async snooze(req, ctx) {
      const { jobId, token, fields: delayMs } = await openHolderCall(ctx, req, () => v.snoozeDelayMs("delay", req.delay));
      return { job: jobToWire(await store.snooze(jobId, token, delayMs)) };
    },

    async acknowledge(req, ctx) {
      const acks = parseAcknowledgements("acks", req.acks, 1);
      return { results: await acknowledgeForCaller(ctx, store, acks) };
    },
  };
}
