/**
 * The Work stream (docs/api.md "The batched path: Acknowledge and Work"):
 * leases go down and acknowledgement results come back on one HTTP/2
 * stream, many per message (workStream).
 */
import { create } from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { ClaimStreams } from "../dispatch/claim-streams.js";
import { releaseUnsent } from "../dispatch/unsent-leases.js";
import type { Logger } from "../logger.js";
import type { Store } from "../store/store.js";
import {
  WorkResponseSchema,
  type AcknowledgementResult,
  type WorkRequest,
  type WorkResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ackResultToWire, applyAcknowledgements, parseAcknowledgements, type AckOutcome, type AckSpec } from "./acknowledgements.js";
import { invalidArgument } from "./errors.js";
import { hasQueueLimit, refusedJobs, requireQueue } from "./queue-access.js";
import * as v from "./validate.js";
import { encodersFor, type HandEncoders } from "./hand-wire.js";
import { deliverableLeases, withLeases, type WireLease } from "./lease-delivery.js";

export interface WorkStreamDeps {
  store: Store;
  /** Where leases that could not be delivered are reported. */
  log?: Logger;
  claimStreams: ClaimStreams;
  /** Idle interval between keepalive messages. */
  keepaliveMs: number;
  /** Leases encoded by hand for binary clients (hand-wire.ts); absent: as messages. */
  handEncoders?: HandEncoders;
}

/**
 * Most (estimated) encoded lease bytes in one response. gRPC clients refuse
 * messages over 4 MiB by default; a response stays well under it however
 * large the jobs are (a single lease over 4 MiB is never sent: see
 * lease-delivery.ts).
 */
const MAX_LEASE_BYTES_PER_MESSAGE = 1024 * 1024;

/**
 * Serves one Work stream:
 *
 * - The first request message carries `start` (queue, worker, lease
 *   duration, max_in_flight); a later `start` is invalid_argument. Any
 *   message may carry up to 1000 acknowledgements.
 * - Leases come from the queue's StreamClaims pump (ClaimStreams), so the
 *   in-flight accounting is StreamClaims': at most `max_in_flight`
 *   unfinished leases, a lease finishing by any path (this stream,
 *   Acknowledge, Complete, expiry, cancel) makes room.
 * - Acknowledgements of one message are issued to the store together (one
 *   group commit); messages are applied in arrival order, and each
 *   message's store calls are issued as soon as it is read, so a slow commit
 *   does not stop the stream from reading. Results go out in arrival order.
 * - Every response carries whatever is ready: leases that fit the stream's
 *   room, results, and the jobs of leases it sent that were cancelled while
 *   running (`cancelled_job_ids`: the worker stops their handlers and sends
 *   no outcome). The first response is empty (a keepalive), so the
 *   client gets the headers at once; an idle stream sends another every
 *   keepalive interval.
 * - The client half-closing its side ends the stream once every result is
 *   sent: no new lease is handed out after that. Leases claimed but not
 *   sent are released; sent ones stay with the worker until acknowledged or
 *   expired.
 */
export async function* workStream(
  requests: AsyncIterable<WorkRequest>,
  ctx: HandlerContext,
  deps: WorkStreamDeps,
): AsyncGenerator<WorkResponse> {
  const input = requests[Symbol.asyncIterator]();
  const first = await input.next();
  if (first.done === true || first.value.start === undefined) {
    throw invalidArgument("start", "is required in the first message of a Work stream");
  }
  const spec = v.claimStreamSpec("start.", first.value.start);
  requireQueue(ctx, "start.queue", spec.queue);
  const firstAcks = parseAcknowledgements("acks", first.value.acks, 0);

  const encoders = encodersFor(ctx.requestHeader.get("content-type"), deps.handEncoders);
  const stream = deps.claimStreams.register(spec, ctx.signal);
  const results: AcknowledgementResult[] = [];
  /** Settles when every acknowledgement read so far has its result queued. */
  let applied: Promise<void> = Promise.resolve();
  let failure: unknown;
  let inputDone = false;

  /** For a caller limited to queues: settles once the latest message's acknowledgements are issued. */
  let issued: Promise<void> = Promise.resolve();
  /** Issues a message's acknowledgements once its jobs' queues are checked, after the previous message's. */
  const issueChecked = (acks: AckSpec[]): Promise<AckOutcome[]> => {
    const refused = issued.then(() =>
      refusedJobs(
        ctx,
        deps.store,
        acks.map((a) => a.jobId),
      ),
    );
    const outcomes = refused.then((r) => applyAcknowledgements(deps.store, acks, r));
    issued = refused.then(
      () => undefined,
      () => undefined,
    );
    return outcomes;
  };

  const apply = (acks: AckSpec[]): void => {
    if (acks.length === 0) return;
    // Issued now (or, with a queue limit, after the check), in arrival order.
    const outcomes = hasQueueLimit(ctx) ? issueChecked(acks) : applyAcknowledgements(deps.store, acks);
    applied = applied.then(async () => {
      for (const o of await outcomes) results.push(ackResultToWire(o));
      stream.wake();
    });
    applied.catch((err: unknown) => {
      failure ??= err;
      stream.wake();
    });
  };

  const read = async (): Promise<void> => {
    try {
      apply(firstAcks);
      for (;;) {
        const next = await input.next();
        if (next.done === true) break;
        if (next.value.start !== undefined) {
          throw invalidArgument("start", "may only be sent in the first message of a Work stream");
        }
        apply(parseAcknowledgements("acks", next.value.acks, 0));
      }
      await applied;
    } catch (err) {
      failure ??= err;
    } finally {
      inputDone = true;
      stream.wake();
    }
  };

  try {
    void read();
    yield create(WorkResponseSchema, {});
    for (;;) {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows, as is, whatever the input or the store failed with
      if (failure !== undefined) throw failure;
      const claimed = inputDone ? [] : stream.takeReady();
      // A lease a worker could not decode is dead-lettered, never sent (lease-delivery.ts).
      const leases = claimed.length === 0 ? [] : await deliverableLeases(deps.store, deps.log, claimed, encoders);
      if (ctx.signal.aborted) {
        // Never sent: give back the ones that were not dead-lettered.
        const dead = new Set(claimed.map((c) => c.job.id));
        for (const l of leases) dead.delete(l.jobId);
        await releaseUnsent(
          deps.store,
          deps.log,
          claimed.filter((c) => !dead.has(c.job.id)),
        );
        break;
      }
      const ready = results.splice(0);
      const cancelled = stream.takeCancelled();
      if (leases.length > 0 || ready.length > 0 || cancelled.length > 0) {
        for (const message of responses(leases, ready, cancelled)) yield message;
        continue;
      }
      if (inputDone) return;
      if (ctx.signal.aborted) break;
      const woken = await stream.wait(deps.keepaliveMs, ctx.signal);
      if (!woken && !ctx.signal.aborted) yield create(WorkResponseSchema, {});
    }
    // Ended by the server (shutdown: unavailable) or the client (nobody listens).
    throw ConnectError.from(ctx.signal.reason);
  } finally {
    stream.close();
  }
}

/** Leases, results and cancelled jobs as one response, or several when the leases are large. */
function responses(leases: WireLease[], results: AcknowledgementResult[], cancelledJobIds: string[]): WorkResponse[] {
  const out: WorkResponse[] = [];
  let current = create(WorkResponseSchema, { results, cancelledJobIds });
  let batch: WireLease[] = [];
  let bytes = 0;
  const close = () => {
    const message = current;
    out.push(withLeases(message, batch, (lease) => message.leases.push(lease)));
    current = create(WorkResponseSchema, {});
    batch = [];
    bytes = 0;
  };
  for (const lease of leases) {
    if (batch.length > 0 && bytes + lease.bytes > MAX_LEASE_BYTES_PER_MESSAGE) close();
    batch.push(lease);
    bytes += lease.bytes;
  }
  close();
  return out;
}
