/**
 * The hand decoders of the hot unary requests by request type, for the gRPC
 * unary path (server/grpc-unary.ts). Each answers what it is sure of and
 * undefined for the rest, which protobuf-es then parses.
 */
import { decodeAcknowledgeRequest, decodeClaimRequest } from "./ack-decoding.js";
import { decodeSubmitBatchRequest, decodeSubmitRequest } from "./submit-decoding.js";

export const HAND_DECODERS: ReadonlyMap<string, (bytes: Uint8Array) => object | undefined> = new Map<
  string,
  (bytes: Uint8Array) => object | undefined
>([
  ["leasequeue.v1.SubmitRequest", decodeSubmitRequest],
  ["leasequeue.v1.SubmitBatchRequest", decodeSubmitBatchRequest],
  ["leasequeue.v1.ClaimRequest", decodeClaimRequest],
  ["leasequeue.v1.AcknowledgeRequest", decodeAcknowledgeRequest],
]);
