/**
 * The SERVER span of each RPC (docs/operations.md "Tracing"), with the RPC
 * semantic conventions of OpenTelemetry: rpc.system (`grpc` for gRPC and
 * gRPC-Web, `connect_rpc` for Connect), rpc.service, rpc.method,
 * server.address and server.port (the authority the client called),
 * network.peer.address and network.peer.port, and the outcome:
 * rpc.grpc.status_code on gRPC, rpc.connect_rpc.error_code on a failed
 * Connect call. The span's status is an error only for the codes that say
 * the server failed (as the conventions list them for gRPC servers).
 *
 * A call's parent is the remote span of its traceparent and tracestate
 * headers (W3C Trace Context, read as domain/trace-context.ts reads them).
 */
import { Code } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { SpanKind, SpanStatusCode, type Attributes, type Tracer } from "@opentelemetry/api";
import { traceContextFromHeaders, type TraceContext } from "../domain/trace-context.js";
import type { CallSpan, CallSpans, RpcCall } from "../server/call-spans.js";
import { parentContext, traceContextOf } from "./span-contexts.js";

/** Codes that mark a SERVER span failed: the server's fault, not the caller's. */
const SERVER_FAULTS: ReadonlySet<Code> = new Set([
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
]);

function header(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(",") : value;
}

/** host and port of an authority (`host`, `host:port`, `[v6]:port`). */
function hostAndPort(authority: string): { host: string; port: number | undefined } {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(authority);
  if (m === null) return { host: authority, port: undefined };
  return { host: m[1].replace(/^\[|\]$/g, ""), port: m[2] === undefined ? undefined : Number(m[2]) };
}

export function createRpcServerSpans(tracer: Tracer): CallSpans {
  return {
    start({ service, method, req }: RpcCall): CallSpan {
      const headers = req.headers;
      const grpc = (headers["content-type"] ?? "").startsWith("application/grpc");
      const attributes: Attributes = {
        "rpc.system": grpc ? "grpc" : "connect_rpc",
        "rpc.service": service,
        "rpc.method": method,
      };
      const authority = header(headers[":authority"]) ?? header(headers.host);
      if (authority !== null) {
        const { host, port } = hostAndPort(authority);
        attributes["server.address"] = host;
        if (port !== undefined) attributes["server.port"] = port;
      }
      const socket = req.socket;
      if (socket?.remoteAddress !== undefined) attributes["network.peer.address"] = socket.remoteAddress;
      if (socket?.remotePort !== undefined) attributes["network.peer.port"] = socket.remotePort;
      const parent = traceContextFromHeaders(header(headers.traceparent), header(headers.tracestate));
      const span = tracer.startSpan(`${service}/${method}`, { kind: SpanKind.SERVER, attributes }, parentContext(parent));
      let context: TraceContext | undefined;
      return {
        trace: {
          get traceContext() {
            return (context ??= traceContextOf(span.spanContext()));
          },
        },
        end(code) {
          if (grpc) span.setAttribute("rpc.grpc.status_code", code ?? 0);
          else if (code !== undefined) span.setAttribute("rpc.connect_rpc.error_code", codeToString(code));
          if (code !== undefined && SERVER_FAULTS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: codeToString(code) });
          span.end();
        },
      };
    },
  };
}
