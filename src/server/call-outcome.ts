/**
 * Reads the outcome (the Connect code) of a universal response as it is
 * written, in the shape of each protocol, and turns connect-es's `internal`
 * for an undecodable binary request message into `invalid_argument`.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  codeFromHttpStatus,
  codeToHttpStatus,
  createEndStreamSerialization,
  endStreamFlag,
  errorFromJsonBytes,
  errorToJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { requestParseError } from "./call-record.js";

export interface CallOutcome {
  /** The call's code once the response is written: undefined while unknown, "ok" for success. */
  code: Code | "ok" | undefined;
}

const compressedFlag = 0b01;
const endStream = createEndStreamSerialization(undefined);

/**
 * Wraps `response` so that `outcome.code` is set once its status is known,
 * and a binary parse failure of the request message becomes invalid_argument.
 *
 * Why here: connect-es parses a unary or server-stream request before any
 * interceptor runs, and words a protobuf binary parse failure as `internal`
 * (createBinarySerialization serves clients and servers alike). Neither the
 * serializer nor the parse step has a hook, so the one seam is the response
 * the protocol handler produced: the error is recognised by connect's own
 * wording ("parse binary: ...", which no handler of ours produces) and
 * rewritten where it travels (Connect unary JSON body, gRPC trailers, the
 * gRPC-Web trailer frame, the Connect end-stream message). Every other
 * response passes through byte for byte.
 */
export function watchOutcome(
  response: UniversalServerResponse,
  inputTypeName: string,
): { response: UniversalServerResponse; outcome: CallOutcome } {
  const outcome: CallOutcome = { code: undefined };
  const contentType = response.header?.get("content-type") ?? "";
  const translate = (error: ConnectError): ConnectError => requestParseError(error.code, error.rawMessage, inputTypeName) ?? error;

  if (contentType.startsWith("application/grpc-web")) {
    return { response: { ...response, body: rewriteFrames(response, trailerFlag, grpcWebTrailer) }, outcome };
  }
  if (contentType.startsWith("application/grpc")) {
    const trailer = response.trailer;
    return {
      response: {
        ...response,
        body: afterBody(response.body, () => {
          if (trailer === undefined) return;
          const error = findTrailerError(trailer);
          if (error === undefined) {
            outcome.code = "ok";
            return;
          }
          const translated = translate(error);
          if (translated !== error) {
            trailer.delete("grpc-status-details-bin");
            setTrailerStatus(trailer, translated);
          }
          outcome.code = translated.code;
        }),
      },
      outcome,
    };
  }
  if (contentType.startsWith("application/connect+")) {
    return {
      response: {
        ...response,
        body: rewriteFrames(response, endStreamFlag, (data) => {
          const end = endStream.parse(data);
          if (end.error === undefined) {
            outcome.code = "ok";
            return data;
          }
          const translated = translate(end.error);
          outcome.code = translated.code;
          return translated === end.error ? data : endStream.serialize({ ...end, error: translated });
        }),
      },
      outcome,
    };
  }
  // Connect unary (or a response connect produced before choosing a protocol).
  if (response.status === 200) {
    outcome.code = "ok";
    return { response, outcome };
  }
  const fallbackCode = codeFromHttpStatus(response.status);
  if (response.body === undefined || response.header?.has("content-encoding")) {
    outcome.code = fallbackCode;
    return { response, outcome };
  }
  const body = response.body;
  const header = response.header;
  // universalResponseToNodeResponse writes the status and headers only after
  // it has pulled the first chunk, so both may still change here.
  const rewrittenResponse: UniversalServerResponse = { ...response };
  rewrittenResponse.body = (async function* () {
    const chunks: Uint8Array[] = [];
    for await (const chunk of body) chunks.push(chunk);
    const bytes = Buffer.concat(chunks);
    const error = errorFromJsonBytes(bytes, undefined, new ConnectError("unreadable error", fallbackCode));
    const translated = translate(error);
    outcome.code = translated.code;
    if (translated === error) {
      yield bytes;
      return;
    }
    const out = errorToJsonBytes(translated, {});
    header?.set("content-length", String(out.byteLength));
    rewrittenResponse.status = codeToHttpStatus(translated.code);
    yield out;
  })();
  return { response: rewrittenResponse, outcome };

  function grpcWebTrailer(data: Uint8Array): Uint8Array {
    const trailer = trailerParse(data);
    const error = findTrailerError(trailer);
    if (error === undefined) {
      outcome.code = "ok";
      return data;
    }
    const translated = translate(error);
    outcome.code = translated.code;
    if (translated === error) return data;
    trailer.delete("grpc-status-details-bin");
    setTrailerStatus(trailer, translated);
    return trailerSerialize(trailer);
  }
}

/** Runs `done` after the last chunk of `body` and before the caller sees its end. */
async function* afterBody(body: UniversalServerResponse["body"], done: () => void): AsyncGenerator<Uint8Array> {
  if (body !== undefined) yield* body;
  done();
}

/**
 * Passes enveloped frames through, handing the (uncompressed) frame with
 * `flag` to `rewrite`. connect joins each envelope into one chunk before it
 * reaches the adapter, so a chunk is one frame.
 */
async function* rewriteFrames(
  response: UniversalServerResponse,
  flag: number,
  rewrite: (data: Uint8Array) => Uint8Array,
): AsyncGenerator<Uint8Array> {
  if (response.body === undefined) return;
  for await (const chunk of response.body) {
    const flags = chunk[0];
    if (chunk.length < 5 || (flags & flag) !== flag || (flags & compressedFlag) !== 0) {
      yield chunk;
      continue;
    }
    const data = chunk.subarray(5);
    const out = rewrite(data);
    if (out === data) {
      yield chunk;
      continue;
    }
    const frame = Buffer.alloc(5 + out.byteLength);
    frame.writeUInt8(flags, 0);
    frame.writeUInt32BE(out.byteLength, 1);
    frame.set(out, 5);
    yield frame;
  }
}
