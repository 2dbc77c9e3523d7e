/**
 * One server-streaming RPC over the Connect protocol's streaming JSON, with
 * fetch: the request is one envelope (a flags byte, a 4-byte big-endian
 * length, the JSON), and so is each message of the response, the last one
 * flagged end-of-stream and carrying the error, if any. No request
 * streaming: a browser cannot stream a request body over HTTP/1.1, which is
 * why Work (bidi) has no form.
 */
import { callHeaders } from "./token.js";
import { readWireError, type WireError } from "./wire-error.js";

const FLAG_COMPRESSED = 0b01;
const FLAG_END_STREAM = 0b10;

export type StreamEvent =
  | { kind: "message"; json: unknown }
  /** The stream ended: with an error, or cleanly. */
  | { kind: "end"; error?: WireError }
  /** An answer that is not a Connect stream: its status and text. */
  | { kind: "http"; status: number; text: string }
  | { kind: "unreachable"; message: string };

function envelope(json: string): Uint8Array<ArrayBuffer> {
  const data = new TextEncoder().encode(json);
  const out = new Uint8Array(5 + data.length);
  new DataView(out.buffer).setUint32(1, data.length);
  out.set(data, 5);
  return out;
}

/** Sends `body` (JSON text, as typed) and yields each message as it arrives, then the end. Abort `signal` to stop. */
export async function* callServerStream(path: string, body: string, signal: AbortSignal): AsyncGenerator<StreamEvent> {
  let res: Response;
  try {
    res = await fetch(path, { method: "POST", headers: callHeaders("application/connect+json"), body: envelope(body), signal });
  } catch (err) {
    if (signal.aborted) return;
    yield { kind: "unreachable", message: err instanceof Error ? err.message : String(err) };
    return;
  }
  if (res.status !== 200 || res.body === null || !res.headers.get("content-type")?.startsWith("application/connect+json")) {
    yield { kind: "http", status: res.status, text: await res.text() };
    return;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = new Uint8Array(0);
  try {
    for (;;) {
      while (buffered.length >= 5) {
        const length = new DataView(buffered.buffer, buffered.byteOffset).getUint32(1);
        if (buffered.length < 5 + length) break;
        const flags = buffered[0];
        const json = JSON.parse(decoder.decode(buffered.subarray(5, 5 + length))) as unknown;
        buffered = buffered.slice(5 + length);
        if (flags & FLAG_COMPRESSED) throw new Error("the server sent a compressed message, which this page never asks for");
        if (flags & FLAG_END_STREAM) {
          yield { kind: "end", error: readWireError((json as { error?: unknown }).error) };
          return;
        }
        yield { kind: "message", json };
      }
      const { done, value } = await reader.read();
      if (done) break;
      const joined = new Uint8Array(buffered.length + value.length);
      joined.set(buffered);
      joined.set(value, buffered.length);
      buffered = joined;
    }
  } catch (err) {
    if (signal.aborted) return;
    yield { kind: "unreachable", message: err instanceof Error ? err.message : String(err) };
    return;
  } finally {
    // Ends the response when the caller stops reading early; a no-op after its end.
    reader.cancel().catch(() => undefined);
  }
  yield { kind: "unreachable", message: "the stream ended without its end message (the connection was cut)" };
}
