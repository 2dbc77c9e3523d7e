/**
 * The Node side of WatchEvents' output: for each WatchEvents call whose
 * content type is a streaming one, a WatchOutput over its Node response
 * (service/watch-events-handler.ts), handed to the handler through the
 * call's context values. It writes batches as shared frames
 * (watch-frames.ts), and tells the event feed how many bytes the client
 * has not taken: on HTTP/2 the stream's buffer (what flow control holds
 * back); on HTTP/1.1 the response's and its socket's buffers plus the
 * kernel's send queue of the connection (kernel-send-queue.ts), which
 * absorbs megabytes before Node's own grow. It serves LEASEQUEUE_WIRE=library
 * too: writing the batches itself is what lets it hold a watch to its
 * unread-bytes limit (through connect's stream, the handler would wait on
 * its writes and the feed would never see the bytes pile up).
 */
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import { LeaseQueueService } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { WATCH_OUTPUT, type WatchOutput } from "../../service/watch-events-handler.js";
import { KernelSendQueues } from "./kernel-send-queue.js";
import { watchFrames, watchWireFormat, type WatchWireFormat } from "./watch-frames.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

export interface WatchOutputsOptions {
  /** LEASEQUEUE_WATCH_MAX_PENDING_BYTES: also how much may go unconfirmed into the kernel on HTTP/1.1. */
  maxPendingBytes: number;
}

export interface WatchOutputs {
  /** For the RPC handler's `contextValues`: a WatchOutput for WatchEvents calls (`method`: the call's). */
  addTo(values: ContextValues, req: NodeRequest, res: NodeResponse, method: DescMethod): void;
}

export function createWatchOutputs({ maxPendingBytes }: WatchOutputsOptions): WatchOutputs {
  const kernel = new KernelSendQueues();
  return {
    addTo(values, req, res, method) {
      if (method !== LeaseQueueService.method.watchEvents) return;
      const format = watchWireFormat(req.headers["content-type"]);
      if (format !== undefined) values.set(WATCH_OUTPUT, watchOutputOf(res, kernel, maxPendingBytes, format));
    },
  };
}

function watchOutputOf(res: NodeResponse, kernel: KernelSendQueues, maxPendingBytes: number, format: WatchWireFormat): WatchOutput {
  const kernelQueue = "stream" in res || res.socket === null ? undefined : kernel.probe(res.socket, maxPendingBytes);
  return {
    pendingOutputBytes: () => res.writableLength + (kernelQueue?.queued() ?? 0),
    whenDrained() {
      // Node's own buffer of the stream (HTTP/2: what flow control holds back) is over its mark;
      // on HTTP/1.1 the kernel's queue is whenWritable's, which the handler awaits after each write.
      const needDrain = "stream" in res ? res.stream.writableNeedDrain : res.writableNeedDrain;
      if (!needDrain || res.destroyed) return undefined;
      return new Promise<void>((resolve) => {
        const done = () => {
          res.off("drain", done);
          res.off("close", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
      });
    },
    write(batch) {
      if (res.destroyed || res.writableEnded) return;
      // A failed write (the client went away) ends the call through its signal.
      (res as http.ServerResponse).write(watchFrames(batch, format), () => {});
      // HTTP/1.1 corks the socket until the next tick; flush now, so that what
      // Node still holds afterwards is only what the kernel would not take.
      if (!("stream" in res)) res.socket?.uncork();
    },
    whenWritable: () =>
      kernelQueue !== undefined && kernelQueue.unconfirmed() > kernelQueue.allowance() ? kernelQueue.nextSample() : undefined,
    closeAfter(graceMs) {
      if (res.destroyed) return;
      const timer = setTimeout(() => res.destroy(), graceMs);
      timer.unref();
      res.once("close", () => clearTimeout(timer));
    },
  };
}
