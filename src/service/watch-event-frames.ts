/**
 * The WatchEvents fast path: events encoded once per wire format and written
 * many at a time.
 *
 * A busy server commits thousands of events a second and a watch may have
 * hundreds of subscribers. Handing each event to the RPC framework as its
 * own message costs every subscriber a trip through the framework's stream
 * pipeline, a serialization and a socket write per event. Instead:
 * - each event is encoded once per wire format (protobuf binary, JSON) into
 *   its length-prefixed frame, shared by every subscriber (the frame is the
 *   same for gRPC, gRPC-Web and the Connect streaming protocol: one flags
 *   byte, a 4-byte big-endian length, the message);
 * - after the first message (which the framework sends with the response
 *   headers), all events a subscriber has waiting go out in one write to
 *   the response it already started;
 * - the transport also tells the feed how many bytes are still waiting in
 *   the connection, so a client that never reads is dropped even when its
 *   socket accepts every write (HTTP/1.1).
 * The error that ends a watch still goes through the framework, so trailers
 * and end-of-stream messages stay the framework's.
 *
 * The transport puts a WatchOutput into the call's context values under
 * WATCH_OUTPUT; without one (in-memory transports) the handler yields one
 * message per event, the framework's way, sharing one message per event.
 */
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { createContextKey } from "@connectrpc/connect";
import type { WatchOutputProbe } from "../dispatch/event-feed.js";
import type { JobEvent as DomainEvent } from "../domain/job.js";
import { WatchEventsResponseSchema, type WatchEventsResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { encodeEventResponse } from "./lease-encoding.js";
import { eventToWire } from "./wire.js";

/** The response body of one WatchEvents call, as its transport lets the handler append to it. */
export interface WatchOutput extends WatchOutputProbe {
  /** Appends bytes to the response body, after what the framework wrote; does nothing once the response is gone. */
  write(bytes: Uint8Array): void;
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

/** How long a client dropped as too slow has to read the backlog and the error before its connection is cut. */
export const SLOW_SUBSCRIBER_GRACE_MS = 5_000;

/** Where the transport hands a WatchEvents handler its WatchOutput (absent: the framework's path). */
export const WATCH_OUTPUT = createContextKey<WatchOutput | undefined>(undefined, {
  description: "leasequeue WatchEvents response output",
});

export type WatchWireFormat = "binary" | "json";

/** The message encoding a request's content type asks for; undefined when it is not one of the streaming types. */
export function watchWireFormat(contentType: string | null): WatchWireFormat | undefined {
  if (contentType === null) return undefined;
  const type = contentType.split(";", 1)[0].trim().toLowerCase();
  if (/^application\/(grpc|grpc-web|connect)\+json$/.test(type)) return "json";
  if (/^application\/(grpc|grpc-web)(\+proto)?$/.test(type) || type === "application/connect+proto") return "binary";
  return undefined;
}

/** The keepalive message: a WatchEventsResponse without `event`. */
export const KEEPALIVE_RESPONSE: WatchEventsResponse = create(WatchEventsResponseSchema);

interface Encoded {
  message?: WatchEventsResponse;
  binary?: Buffer;
  json?: Buffer;
}

/**
 * Encodings by event object. The feed routes the same object to every
 * subscriber, so whoever needs an encoding first builds it for all; the
 * entry goes when the event object does. Binary frames are written straight
 * from the event (lease-encoding.ts), without a message object.
 */
const encodings = new WeakMap<DomainEvent, Encoded>();

function encodedOf(e: DomainEvent): Encoded {
  let entry = encodings.get(e);
  if (entry === undefined) {
    entry = {};
    encodings.set(e, entry);
  }
  return entry;
}

/** The WatchEventsResponse carrying `e`, one object per event for every subscriber. */
export function watchResponseOf(e: DomainEvent): WatchEventsResponse {
  const entry = encodedOf(e);
  return (entry.message ??= create(WatchEventsResponseSchema, { event: eventToWire(e) }));
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = 0; // not compressed, not end-of-stream
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

function frameOf(e: DomainEvent, format: WatchWireFormat): Buffer {
  const entry = encodedOf(e);
  if (format === "binary") return (entry.binary ??= frame(encodeEventResponse(e)));
  return (entry.json ??= frame(Buffer.from(toJsonString(WatchEventsResponseSchema, watchResponseOf(e)))));
}

const KEEPALIVE_FRAMES: Record<WatchWireFormat, Buffer> = {
  binary: frame(toBinary(WatchEventsResponseSchema, KEEPALIVE_RESPONSE)),
  json: frame(Buffer.from(toJsonString(WatchEventsResponseSchema, KEEPALIVE_RESPONSE))),
};

/** The frames of a keepalive (`null`) or of a batch of events, ready for one write. */
export function watchFrames(batch: readonly DomainEvent[] | null, format: WatchWireFormat): Buffer {
  if (batch === null) return KEEPALIVE_FRAMES[format];
  if (batch.length === 1) return frameOf(batch[0], format);
  return Buffer.concat(batch.map((e) => frameOf(e, format)));
}
