/** The two ways the worker tests reach a server: the Work stream on gRPC, and StreamClaims with Acknowledge on Connect JSON over HTTP/1.1. */
import type { LeaseQueueClientOptions } from "../../src/worker/index.js";

export const WORKER_TRANSPORTS: Array<[string, Omit<LeaseQueueClientOptions, "url">]> = [
  ["gRPC (Work)", { transport: "grpc" }],
  ["Connect over HTTP/1.1 (StreamClaims and Acknowledge)", { transport: "connect", httpVersion: "1.1", useBinaryFormat: false }],
];
