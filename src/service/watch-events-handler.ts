/**
 * WatchEvents (docs/api.md "WatchEvents: following events"): validate the
 * filter, subscribe to the event feed (dispatch/event-feed.ts), send its
 * batches. With a WatchOutput from the transport, every batch after the
 * first message goes out in one write to the response already started
 * (server/fast-wire/watch-frames.ts writes each event's frame once for all
 * subscribers); without one, one message per event, the framework's way.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, type ServiceImpl } from "@connectrpc/connect";
import { QueueError } from "../domain/errors.js";
import type { JobEvent as DomainEvent } from "../domain/job.js";
import type { EventFeed, WatchOutputProbe, WatchSpec } from "../dispatch/event-feed.js";
import {
  WatchEventsResponseSchema,
  type LeaseQueueService,
  type WatchEventsRequest,
  type WatchEventsResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { invalidArgument } from "./errors.js";
import { requireQueueFilter } from "./queue-access.js";
import * as v from "./validate.js";
import { eventToWire } from "./wire.js";

/**
 * The response body of one WatchEvents call, as its transport lets the
 * handler append to it. The transport also tells the feed how many bytes
 * are still waiting in the connection (WatchOutputProbe), so a client that
 * never reads is dropped even when its socket accepts every write
 * (HTTP/1.1). The error that ends a watch still goes through the framework,
 * so trailers and end-of-stream messages stay the framework's.
 */
export interface WatchOutput extends WatchOutputProbe {
  /**
   * Appends a batch of events (`null`: a keepalive) to the response body,
   * after what the framework wrote, encoded as the call's messages are;
   * does nothing once the response is gone.
   */
  write(batch: readonly DomainEvent[] | null): void;
  /**
   * Undefined when more may be written now; otherwise resolves when the
   * transport knows again how much the client has taken (so that a client
   * that never reads cannot soak up more than about the limit unseen, as
   * the kernel's socket buffers would on HTTP/1.1).
   */
  whenWritable(): Promise<void> | undefined;
  /**
   * The watch was dropped for not reading: give the client `graceMs` to read
   * what is waiting and the error after it, then cut the connection (or the
   * HTTP/2 stream), so a client that never reads stops holding the server's
   * memory.
   */
  closeAfter(graceMs: number): void;
}

/** Where the transport hands a WatchEvents handler its WatchOutput (absent: the framework's path). */
export const WATCH_OUTPUT = createContextKey<WatchOutput | undefined>(undefined, {
  description: "leasequeue WatchEvents response output",
});

/** How long a client dropped as too slow has to read the backlog and the error before its connection is cut. */
export const SLOW_SUBSCRIBER_GRACE_MS = 5_000;

/** The keepalive message: a WatchEventsResponse without `event`. */
export const KEEPALIVE_RESPONSE: WatchEventsResponse = create(WatchEventsResponseSchema);

/**
 * Messages by event object. The feed routes the same object to every
 * subscriber, so whoever needs the message first builds it for all; the
 * entry goes when the event object does.
 */
const messages = new WeakMap<DomainEvent, WatchEventsResponse>();

/** The WatchEventsResponse carrying `e`, one object per event for every subscriber. */
export function watchResponseOf(e: DomainEvent): WatchEventsResponse {
  let message = messages.get(e);
  if (message === undefined) {
    message = create(WatchEventsResponseSchema, { event: eventToWire(e) });
    messages.set(e, message);
  }
  return message;
}

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
      const output = ctx.values.get(WATCH_OUTPUT);
      let headersSent = false;
      try {
        for await (const batch of events.watchBatches(spec, ctx.signal, { output })) {
          if (output !== undefined && headersSent) {
            output.write(batch);
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
