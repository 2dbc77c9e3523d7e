/**
 * Where the hand decoders serve: the hot unary requests by request type,
 * for the gRPC unary path (grpc-unary.ts), and the Work stream's requests
 * for binary clients (binaryRoutes). Each decoder answers what it is sure
 * of and undefined for the rest, which protobuf-es then parses.
 */
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { LeaseQueueService } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { decodeAcknowledgeRequest, decodeClaimRequest, UNDECODED_WORK, workRequestsOf, type UndecodedFields } from "./ack-decoding.js";
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

/**
 * What binary clients get instead of the router's own Work (rpc-handler.ts
 * `binaryRoutes`): the Work stream with its requests read by hand
 * (ack-decoding.ts), the service's own Work behind it.
 */
export function binaryRoutes(service: Pick<ServiceImpl<typeof LeaseQueueService>, "work">): (router: ConnectRouter) => void {
  return (router) => {
    router.rpc(UNDECODED_WORK, (requests: AsyncIterable<UndecodedFields>, ctx) => service.work(workRequestsOf(requests), ctx));
  };
}
