/**
 * The fast wire's one door (README.md beside this file): everything the
 * rest of the server uses of the paths that stand in for connect-es's and
 * protobuf-es's own. app.ts wires them in when LEASEQUEUE_WIRE=fast (the
 * default) and leaves them out with LEASEQUEUE_WIRE=library; no other file
 * outside this folder imports from it but rpc-handler.ts (the gRPC unary
 * path), which the architecture test holds.
 */
export { createGrpcUnaryMethod, servesAsGrpcUnary, type GrpcUnaryCall, type UnaryImplSpec } from "./grpc-unary.js";
export { binaryRoutes } from "./hand-decoders.js";
export { HAND_ENCODERS } from "./lease-encoding.js";
export { createWatchOutputs, type WatchOutputs } from "./node-watch-output.js";
