/**
 * Responses whose repeated results are written by the hand encoders
 * (hand-wire.ts) and carried as unknown fields, which protobuf-es writes verbatim: the
 * bytes toBinary would write for the result messages, without building them.
 */
import { create, toBinary, type UnknownField } from "@bufbuild/protobuf";
import type { SubmitOutcome } from "../store/store.js";
import {
  AcknowledgementResultSchema,
  ClaimResponseSchema,
  SubmitBatchResponseSchema,
  type AcknowledgementResult,
  type ClaimResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { HandEncoders } from "./hand-wire.js";
import { withLeases, type WireLease } from "./lease-delivery.js";

/**
 * SubmitBatch's response for a binary client, every result encoded by hand.
 * Undefined when a job cannot be encoded that way (a stored JSON value it
 * cannot read); the caller then builds messages, for every result, so that
 * they stay in request order.
 */
export function encodedSubmitBatch(outcomes: SubmitOutcome[], basic: boolean, encoders: HandEncoders) {
  const response = create(SubmitBatchResponseSchema, {});
  const fields: UnknownField[] = [];
  try {
    for (const o of outcomes) fields.push(encoders.field(1, encoders.submitResponse(o.job, o.deduplicated, basic)));
  } catch {
    return undefined;
  }
  response.$unknown = fields;
  return response;
}

/**
 * Claim's response: leases as messages (JSON clients) or as their encoded
 * bytes (binary clients), and the results of the request's acks. protobuf-es
 * writes unknown fields after the known ones, so beside encoded leases
 * (field 1) the results (field 2) are encoded too and follow them: the bytes
 * are those of the same response built from messages. `encoders` is set
 * when the leases were encoded with them.
 */
export function claimResponse(
  leases: WireLease[],
  results: AcknowledgementResult[],
  encoders: HandEncoders | undefined,
): ClaimResponse | { leases: []; results: [] } {
  if (leases.length === 0 && results.length === 0) return { leases: [], results: [] };
  const response = create(ClaimResponseSchema, {});
  withLeases(response, leases, (lease) => response.leases.push(lease));
  if (response.$unknown === undefined || encoders === undefined) response.results = results;
  else for (const r of results) response.$unknown.push(encoders.field(2, toBinary(AcknowledgementResultSchema, r)));
  return response;
}
