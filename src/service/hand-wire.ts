/**
 * What the handlers take from the server's hand-written wire paths
 * (server/fast-wire/, docs/performance.md "The fast wire"), without
 * importing them: the encoders they call for binary clients, and the JSON
 * text the hand decoders leave beside the messages they read. With
 * LEASEQUEUE_WIRE=library the handlers get no encoders and no message
 * carries decoded text, so every answer is the libraries' own.
 */
import type { UnknownField } from "@bufbuild/protobuf";
import type { Job } from "../domain/job.js";
import { nestedTooDeepText } from "../domain/json-depth.js";
import type { ClaimedLease } from "../store/store.js";

/** Messages written as protobuf binary straight from domain values: the bytes toBinary writes for the messages wire.ts builds. */
export interface HandEncoders {
  /**
   * A Lease. Throws NestingTooDeep for a payload, result or progress nested
   * past docs/api.md "Bounds", and SyntaxError for stored JSON it cannot read.
   */
  lease(claimed: ClaimedLease): Uint8Array;
  /** A SubmitResponse: the job, whole or (`basic`, JOB_VIEW_BASIC) without payload, result and last_error; throws as `lease`. */
  submitResponse(job: Job, deduplicated: boolean, basic: boolean): Uint8Array;
  /** An encoded message as the entry of message field `no`: the unknown field that protobuf-es writes verbatim. */
  field(no: number, message: Uint8Array): UnknownField;
}

/** The JSON fields of a Job, each a google.protobuf.Value. */
export type JsonField = "payload" | "result" | "progress";

/** Thrown by an encoder when a stored payload, result or progress is nested deeper than docs/api.md "Bounds" allows. */
export class NestingTooDeep extends Error {
  constructor(readonly field: JsonField) {
    super(`${field} is ${nestedTooDeepText()}`);
  }
}

/** The encoders for a call's answers: only for a client of protobuf binary, and only while the server has them. */
export function encodersFor(contentType: string | null, encoders: HandEncoders | undefined): HandEncoders | undefined {
  if (encoders === undefined) return undefined;
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  return type.endsWith("+json") || type === "application/json" ? undefined : encoders;
}

/**
 * The JSON text of the one google.protobuf.Value field of a message a hand
 * decoder read (SubmitRequest.payload, AckComplete.result,
 * AckHeartbeat.progress), compact as validation would write it: read
 * straight from the bytes instead of into a tree of Value messages that
 * validation would walk, convert and stringify.
 */
const DECODED_JSON = new WeakMap<object, string>();

/** For a hand decoder: `json` is the text of `message`'s Value field. */
export function keepDecodedJson(message: object, json: string): void {
  DECODED_JSON.set(message, json);
}

/** The text a hand decoder kept for `message`'s Value field; undefined when protobuf-es read the message. */
export function decodedJsonOf(message: object): string | undefined {
  return DECODED_JSON.get(message);
}
