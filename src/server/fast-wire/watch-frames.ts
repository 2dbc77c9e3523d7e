/**
 * WatchEvents' frames: each event encoded once per wire format into its
 * length-prefixed frame, shared by every subscriber, so that a batch of
 * events goes out in one write (node-watch-output.ts) instead of a trip
 * through connect's stream pipeline, a serialization and a socket write
 * per event and per subscriber. The frame is the same for gRPC, gRPC-Web
 * and the Connect streaming protocol: one flags byte, a 4-byte big-endian
 * length, the message. Binary messages are written straight from the
 * event (lease-encoding.ts); JSON ones by protobuf-es from the message the
 * handler would have yielded (service/watch-events-handler.ts).
 */
import { toBinary, toJsonString } from "@bufbuild/protobuf";
import type { JobEvent as DomainEvent } from "../../domain/job.js";
import { WatchEventsResponseSchema } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { KEEPALIVE_RESPONSE, watchResponseOf } from "../../service/watch-events-handler.js";
import { encodeEventResponse } from "./lease-encoding.js";

export type WatchWireFormat = "binary" | "json";

/** The message encoding a request's content type asks for; undefined when it is not one of the streaming types. */
export function watchWireFormat(contentType: string | null | undefined): WatchWireFormat | undefined {
  if (contentType === null || contentType === undefined) return undefined;
  const type = contentType.split(";", 1)[0].trim().toLowerCase();
  if (/^application\/(grpc|grpc-web|connect)\+json$/.test(type)) return "json";
  if (/^application\/(grpc|grpc-web)(\+proto)?$/.test(type) || type === "application/connect+proto") return "binary";
  return undefined;
}

interface Frames {
  binary?: Buffer;
  json?: Buffer;
}

/** Frames by event object: whoever needs a frame first builds it for every subscriber; the entry goes when the event object does. */
const frames = new WeakMap<DomainEvent, Frames>();

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = 0; // not compressed, not end-of-stream
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

function frameOf(e: DomainEvent, format: WatchWireFormat): Buffer {
  let entry = frames.get(e);
  if (entry === undefined) {
    entry = {};
    frames.set(e, entry);
  }
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
