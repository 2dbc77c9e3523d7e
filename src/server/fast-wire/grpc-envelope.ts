/**
 * The gRPC framing of a unary call's messages: each one a five-byte prefix
 * (flags, then the length, big-endian) and its bytes, read and written as
 * connect does (grpc-unary.ts).
 */
import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/** The prefix's flag of a compressed message. */
export const COMPRESSED_FLAG = 0b01;

/**
 * Reads the request body as connect does for a unary call: the envelopes in
 * order, each length checked as soon as its prefix arrives, each message
 * parsed as soon as it is complete, a second one refused (after it parsed);
 * at the end of the body, a stream its client reset is `canceled` (Node
 * ends such a body as if END_STREAM had arrived, and sets the reset code
 * later in the same turn), unread bytes are an incomplete envelope, and no
 * message at all is refused. Stops reading at the first refusal.
 */
export function readSingleMessage<T>(req: http2.Http2ServerRequest, readMaxBytes: number, parse: (bytes: Uint8Array) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let buffered = 0;
    /** The length of the envelope being read, once its prefix is in; -1 before. */
    let length = -1;
    let flags = 0;
    let parsed: { message: T } | undefined;
    let stopped = false;
    const stop = (err: Error) => {
      stopped = true;
      req.off("data", onData);
      req.off("end", onEnd);
      req.pause();
      reject(err);
    };
    const take = (n: number): Buffer => {
      const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, buffered);
      chunks.length = 0;
      if (all.byteLength > n) chunks.push(all.subarray(n));
      buffered -= n;
      return all.subarray(0, n);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      buffered += chunk.byteLength;
      try {
        for (;;) {
          if (length < 0) {
            if (buffered < 5) return;
            const prefix = take(5);
            flags = prefix.readUInt8(0);
            length = prefix.readUInt32BE(1);
            if (length > readMaxBytes) {
              throw new ConnectError(
                `message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`,
                Code.ResourceExhausted,
              );
            }
          }
          if (buffered < length) return;
          const data = take(length);
          length = -1;
          if ((flags & COMPRESSED_FLAG) === COMPRESSED_FLAG) {
            throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
          }
          const message = parse(data);
          if (parsed !== undefined)
            throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
          parsed = { message };
        }
      } catch (err) {
        stop(err instanceof Error ? err : new ConnectError(String(err), Code.Internal));
      }
    };
    const onEnd = () => {
      setImmediate(() => {
        if (stopped) return;
        const rst = req.stream.rstCode;
        if (rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR) {
          return stop(new ConnectError(`the client reset the stream (HTTP/2 error code ${rst})`, Code.Canceled));
        }
        // Like connect's envelope reader: a prefix read whose message never came is not "incomplete", only unread bytes are.
        if (buffered > 0) return stop(new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument));
        if (parsed === undefined)
          return stop(new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented));
        resolve(parsed.message);
      });
    };
    req.on("data", onData);
    req.once("end", onEnd);
  });
}

/** `data` as one message frame with the prefix's `flags`. */
export function envelope(flags: number, data: Uint8Array): Uint8Array {
  const frame = Buffer.allocUnsafe(5 + data.byteLength);
  frame.writeUInt8(flags, 0);
  frame.writeUInt32BE(data.byteLength, 1);
  frame.set(data, 5);
  return frame;
}
