/** A handler's context for calling a LeaseQueueService handler directly, as a gRPC call with binary messages would reach it. */
import { createHandlerContext } from "@connectrpc/connect";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

export function grpcHandlerContext(method: keyof typeof LeaseQueueService.method): ReturnType<typeof createHandlerContext> {
  return createHandlerContext({
    service: LeaseQueueService,
    method: LeaseQueueService.method[method],
    protocolName: "grpc",
    requestMethod: "POST",
    url: `http://localhost/leasequeue.v1.LeaseQueueService/${method}`,
    requestHeader: { "content-type": "application/grpc" },
  });
}
