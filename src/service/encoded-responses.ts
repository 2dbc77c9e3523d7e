/**
 * Responses whose repeated results are written by hand (lease-encoding.ts)
 * and carried as unknown fields, which protobuf-es writes verbatim: the
 * bytes toBinary would write for the result messages, without building them.
 */
import { create, type UnknownField } from "@bufbuild/protobuf";
import type { SubmitOutcome } from "../store/store.js";
import { ClaimResponseSchema, SubmitBatchResponseSchema, type ClaimResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { withLeases, type WireLease } from "./lease-delivery.js";
import { asField, encodeSubmitResponse } from "./lease-encoding.js";

/**
 * SubmitBatch's response for a binary client, every result encoded by hand.
 * Undefined when a job cannot be encoded that way (a stored JSON value it
 * cannot read); the caller then builds messages, for every result, so that
 * they stay in request order.
 */
export function encodedSubmitBatch(outcomes: SubmitOutcome[], basic: boolean) {
  const response = create(SubmitBatchResponseSchema, {});
  const fields: UnknownField[] = [];
  try {
    for (const o of outcomes) fields.push(asField(1, encodeSubmitResponse(o.job, o.deduplicated, basic)));
  } catch {
    return undefined;
  }
  response.$unknown = fields;
  return response;
}

/** Claim's response: leases as messages (JSON clients) or as their encoded bytes (binary clients). */
export function claimResponse(leases: WireLease[]): ClaimResponse | { leases: [] } {
  if (leases.length === 0) return { leases: [] };
  const response = create(ClaimResponseSchema, {});
  return withLeases(response, leases, (lease) => response.leases.push(lease));
}
