/**
 * The Work stream transport (HTTP/2): one bidirectional stream carries the
 * leases down and every acknowledgement up
 * (docs/api.md "The batched path: Acknowledge and Work"), its requests
 * written by WorkStreamSide. A watchdog takes a stream that leaves an
 * acknowledgement unanswered too long for dead.
 */
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { WorkStartSchema, type WorkResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ACK_ANSWER_TIMEOUT_MS, type AckBatcher } from "./ack-batcher.js";
import { rawWorkCallOf, type LeaseQueueClient } from "./client.js";
import { readWorkResponse } from "./lease-decoding.js";
import type { LeaseTransport, LeaseTransportOptions } from "./lease-transport.js";
import { WorkStreamSide } from "./work-stream-side.js";

export class WorkStreamTransport implements LeaseTransport {
  readonly #opts: LeaseTransportOptions & { acks: AckBatcher };
  /** The Work stream now open, if any. */
  #side: WorkStreamSide | undefined;

  /** `acks` sends on the stream while it is open, and by Acknowledge while it is not. */
  constructor(options: LeaseTransportOptions & { acks: AckBatcher }) {
    this.#opts = options;
  }

  async once(connected: () => void): Promise<ConnectError | undefined> {
    const closing = this.#opts.closing;
    const side = new WorkStreamSide(
      create(WorkStartSchema, {
        queue: this.#opts.queue,
        workerId: this.#opts.workerId,
        leaseDuration: durationFromMs(this.#opts.leaseDurationMs),
        maxInFlight: this.#opts.maxInFlight,
      }),
    );
    // close() half-closes the stream after what is batched: the server
    // answers those acknowledgements, hands out no new lease and ends it.
    const halfClose = () => {
      this.#opts.acks.leaveStream(side, true);
      side.halfClose();
    };
    closing.addEventListener("abort", halfClose, { once: true });
    const watchdog = setInterval(() => {
      const since = side.oldestUnansweredAt;
      if (since !== undefined && performance.now() - since > ACK_ANSWER_TIMEOUT_MS) {
        side.fail(
          new ConnectError(`the Work stream left an acknowledgement unanswered for ${ACK_ANSWER_TIMEOUT_MS} ms`, Code.DeadlineExceeded),
        );
      }
    }, 1000);
    watchdog.unref();
    this.#side = side;
    let error: ConnectError | undefined;
    try {
      let first = true;
      for await (const message of workResponses(this.#opts.client, side)) {
        if (first) {
          first = false;
          if (!closing.aborted) this.#opts.acks.useStream(side);
          connected();
        }
        side.takeResults(message.results);
        for (const lease of message.leases) this.#opts.accept(lease);
        for (const jobId of message.cancelledJobIds) this.#opts.cancelled(jobId);
      }
      if (!closing.aborted) error = new ConnectError("the server ended the stream", Code.Unavailable);
    } catch (e) {
      error = side.failure ?? ConnectError.from(e);
      // A message over the server's request limit (set lower than the default): batch smaller.
      if (error.code === Code.ResourceExhausted) this.#opts.acks.shrink();
    } finally {
      clearInterval(watchdog);
      closing.removeEventListener("abort", halfClose);
      this.#opts.acks.leaveStream(side);
      side.fail(error ?? new ConnectError("the Work stream ended", Code.Unavailable));
      if (this.#side === side) this.#side = undefined;
    }
    return closing.aborted ? undefined : error;
  }

  abandon(cause: ConnectError): void {
    this.#side?.fail(cause);
  }
}

/**
 * The Work stream's responses: read by hand (lease-decoding.ts) from a
 * client that createLeaseQueueClient made with binary messages, decoded by
 * protobuf-es otherwise.
 */
async function* workResponses(client: LeaseQueueClient, side: WorkStreamSide): AsyncGenerator<WorkResponse> {
  const raw = rawWorkCallOf(client);
  if (raw === undefined) {
    yield* client.work(side.requests(), { signal: side.signal });
    return;
  }
  for await (const message of raw(side.requests(), { signal: side.signal })) {
    let response: WorkResponse;
    try {
      response = readWorkResponse(message);
    } catch (err) {
      // As connect reports a response it cannot decode.
      throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : String(err)}`, Code.Internal);
    }
    yield response;
  }
}
