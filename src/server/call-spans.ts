/**
 * The SERVER span of each RPC (docs/operations.md "Tracing"), as the API
 * port's adapter (rpc-handler.ts) sees it: started when a call's headers
 * arrive, ended with its code when its response closes. The server's
 * tracing (src/telemetry/) implements it; without an exporter there is none
 * and a call pays one check for it.
 */
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { Code } from "@connectrpc/connect";
import type { CallTrace } from "../service/call-trace.js";

/** A call as its SERVER span describes it. */
export interface RpcCall {
  /** e.g. "leasequeue.v1.LeaseQueueService". */
  service: string;
  /** e.g. "Submit". */
  method: string;
  /** The Node request: its headers (traceparent, tracestate, content-type, authority) and socket. */
  req: http.IncomingMessage | http2.Http2ServerRequest;
}

export interface CallSpan {
  /** What the handlers read (service/call-trace.ts): the span's context, for the jobs the call submits. */
  readonly trace: CallTrace;
  /** Ends the span with the call's code (undefined: ok). */
  end(code: Code | undefined): void;
}

export interface CallSpans {
  start(call: RpcCall): CallSpan;
}
