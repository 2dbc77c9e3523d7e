/**
 * WatchEvents (docs/api.md "WatchEvents: following events"): validate the
 * filter, subscribe to the event feed (dispatch/event-feed.ts), send its
 * batches. With a WatchOutput from the transport, every batch after the
 * first message goes out as shared pre-encoded frames in one write
 * (watch-event-frames.ts); without one, one message per event.
 */
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { QueueError } from "../domain/errors.js";
import type { EventFeed, WatchSpec } from "../dispatch/event-feed.js";
import type { LeaseQueueService, WatchEventsRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { invalidArgument } from "./errors.js";
import { requireQueueFilter } from "./queue-access.js";
import * as v from "./validate.js";
import {
  KEEPALIVE_RESPONSE,
  SLOW_SUBSCRIBER_GRACE_MS,
  WATCH_OUTPUT,
  watchFrames,
  watchResponseOf,
  watchWireFormat,
} from "./watch-event-frames.js";

export interface WatchEventsHandlerDeps {
  /** Serves WatchEvents. */
  events: EventFeed;
}

type WatchEventsHandler = Pick<ServiceImpl<typeof LeaseQueueService>, "watchEvents">;

export function watchEventsHandler({ events }: WatchEventsHandlerDeps): WatchEventsHandler {
  return {
    async *watchEvents(req, ctx) {
      const spec = watchSpec(req);
      requireQueueFilter(ctx, "queue", spec.queue);
      // The first message is a keepalive, produced once the subscription is
      // registered: it makes the transport send the response headers.
      const format = watchWireFormat(ctx.requestHeader.get("content-type"));
      const output = format === undefined ? undefined : ctx.values.get(WATCH_OUTPUT);
      let headersSent = false;
      try {
        for await (const batch of events.watchBatches(spec, ctx.signal, { output })) {
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

/** The feed's filter from a request: queue and job id when set, and where to resume. */
function watchSpec(req: WatchEventsRequest): WatchSpec {
  let afterSequence: number | undefined;
  if (req.afterSequence !== undefined) {
    if (req.afterSequence < 0n) throw invalidArgument("after_sequence", "must not be negative");
    // Anything past 2^53 is past every sequence ever issued: out_of_range from the feed.
    afterSequence = Number(req.afterSequence > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : req.afterSequence);
  }
  return {
    queue: req.queue === "" ? undefined : v.queueName("queue", req.queue),
    jobId: req.jobId === "" ? undefined : v.jobId("job_id", req.jobId),
    afterSequence,
  };
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
