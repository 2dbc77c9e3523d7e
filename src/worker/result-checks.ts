/**
 * The checks a handler's result and progress pass before they are sent:
 * the worker refuses what the server would (docs/api.md "Bounds"),
 * because an acknowledgement the server finds malformed or too large fails
 * its whole message, not just itself.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { toBinary } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { jsonDepth, nestedTooDeepText } from "../domain/json-depth.js";
import { BOUNDS, DEFAULTS } from "../domain/request-bounds.js";
import { jsonToValue } from "./json-values.js";

/** The most a result may take encoded: one acknowledgement alone must fit a request, with room for its other fields. */
const MAX_RESULT_ENCODED_BYTES = DEFAULTS.maxRequestBytes - 2048;

/** The handler's return value as JSON (via JSON.stringify, so Dates and toJSON() behave as usual). */
export function asJsonResult(value: JsonValue | void): JsonValue | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
}

/**
 * Why the server would refuse `result` (docs/api.md "Bounds": 64 KiB of JSON,
 * 32 levels; and no request body over 128 KiB, which protobuf's 9 bytes a
 * number can reach from 64 KiB of JSON), or undefined. Checked here because
 * an acknowledgement the server finds malformed or too large fails its whole
 * Acknowledge request or Work message, not just itself.
 */
export function resultRefusal(result: JsonValue | undefined): ConnectError | undefined {
  if (result === undefined) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(result), "utf8");
  if (bytes > BOUNDS.jsonBytes) {
    return new ConnectError(`complete.result: is ${bytes} bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes`, Code.InvalidArgument);
  }
  // Protobuf is at most about 11 times the JSON of a tiny value, so only a large one can pass the request limit.
  if (bytes > 8 * 1024) {
    const encoded = toBinary(ValueSchema, jsonToValue(result)).byteLength;
    if (encoded > MAX_RESULT_ENCODED_BYTES) {
      return new ConnectError(
        `complete.result: encodes to ${encoded} bytes of protobuf; a request carries at most ${DEFAULTS.maxRequestBytes} bytes`,
        Code.InvalidArgument,
      );
    }
  }
  if (jsonDepth(result, BOUNDS.jsonDepth) > BOUNDS.jsonDepth) {
    return new ConnectError(`complete.result: is ${nestedTooDeepText()}`, Code.InvalidArgument);
  }
  return undefined;
}

/**
 * A progress report as plain JSON the server takes
 * (docs/api.md "Snooze and progress": at most 4 KiB as compact JSON, 32
 * levels), or a TypeError / RangeError. The handler learns at once, rather
 * than a heartbeat failing (an acknowledgement the server finds malformed
 * fails its whole message).
 */
export function checkedProgress(value: JsonValue): JsonValue {
  const json = asJsonResult(value);
  if (json === undefined) throw new TypeError("progress: must be a JSON value (got undefined or a value JSON cannot represent)");
  const bytes = Buffer.byteLength(JSON.stringify(json), "utf8");
  if (bytes > BOUNDS.progressJsonBytes) {
    throw new RangeError(`progress: is ${bytes} bytes of JSON; the limit is ${BOUNDS.progressJsonBytes} bytes`);
  }
  if (jsonDepth(json, BOUNDS.jsonDepth) > BOUNDS.jsonDepth) {
    throw new RangeError(`progress: is ${nestedTooDeepText()}`);
  }
  return json;
}
