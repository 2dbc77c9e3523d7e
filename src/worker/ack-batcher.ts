/**
 * Batched acknowledgements
 * (docs/api.md "The batched path: Acknowledge and Work"): every Complete,
 * Fail, Heartbeat (with its progress), Snooze and Release the worker makes
 * goes through here as an `Acknowledgement`, and leaves in a batch: as soon
 * as 1000 are waiting (the most one Acknowledge request or Work message may
 * carry) or they fill the request body the server reads (128 KiB by default),
 * or when the coalescing window (default 1 ms) after the first of them has
 * passed. So the acknowledgements of handlers that finish together, and the
 * heartbeats of leases that arrived together, share one message.
 */
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { BOUNDS, DEFAULTS } from "../domain/request-bounds.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import type { Status } from "../../gen/ts/google/rpc/status_pb.js";
import { AcknowledgementSchema, type Acknowledgement, type AcknowledgementResult } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { LeaseQueueClient } from "./client.js";

/** The answer to one acknowledgement: success (with the new expiry of a heartbeat), or why not. */
export interface AckAnswer {
  /** Absent on success. */
  error?: ConnectError;
  /** A successful heartbeat's new lease expiry. */
  leaseExpireTime?: Date;
  /**
   * The error is the message's, not the acknowledgement's: the stream or
   * call broke before the answer came, so it may or may not have been
   * applied.
   */
  outcomeUnknown?: boolean;
}

/** One acknowledgement waiting to be sent or answered. */
export interface PendingAck {
  readonly ack: Acknowledgement;
  /** Its share of an encoded request: the message and its field header. */
  readonly bytes: number;
  /** Called exactly once. */
  settle(answer: AckAnswer): void;
}

/** Somewhere a batch can be sent in one message, answered per acknowledgement later. */
export interface AckStream {
  /** Sends `batch` (at most 1000) as one message; false when the stream no longer takes messages. */
  send(batch: PendingAck[]): boolean;
  /**
   * False while it cannot carry a batch soon (the Claim transport during a
   * long-poll): that batch goes by Acknowledge and the stream stays in
   * use. Absent means always ready.
   */
  readonly ready?: boolean;
}

/**
 * Deadline of one Acknowledge call, and how long the Work stream may leave
 * an acknowledgement unanswered before the worker takes it for a dead
 * stream, cancels it and reconnects.
 */
export const ACK_ANSWER_TIMEOUT_MS = 10_000;

export interface AckBatcherOptions {
  client: LeaseQueueClient;
  /** How long the first acknowledgement of a batch waits for others; 0 waits one turn of the event loop. */
  windowMs: number;
  /** Deadline of one Acknowledge call. */
  callTimeoutMs: number;
  /** Aborts Acknowledge calls in flight (close() past its grace). */
  cutoff: AbortSignal;
}

/**
 * Acknowledge calls in flight at once. More acknowledgements wait for the
 * next call, so a busy worker sends fewer, fuller requests; over HTTP/1.1
 * each call in flight needs its own connection.
 */
const MAX_CALLS_IN_FLIGHT = 4;

/**
 * Bytes of acknowledgements in one message: the server's default request
 * limit less room for the request's own framing. A server configured lower
 * answers `resource_exhausted`, and the batcher halves this (shrink()).
 */
const MAX_BATCH_BYTES = DEFAULTS.maxRequestBytes - 1024;
/** The least shrink() goes down to; one acknowledgement larger than the limit still goes alone. */
const MIN_BATCH_BYTES = 4096;

/**
 * Where a batch goes: onto the open Work stream when there is one
 * (`useStream`), or into the next Claim of the unary transport
 * (claim-transport.ts) when it will send one soon; otherwise into a unary
 * Acknowledge call (HTTP/1.1, while the Work stream is reconnecting, or
 * while the unary transport long-polls). Each acknowledgement is answered
 * on its own: the result's status is exactly the refusal the single RPC
 * would have returned, so callers map it as they map that RPC's. A batch that never got
 * its answer (a broken stream or call) is answered `unavailable` per
 * acknowledgement, and the caller decides whether to send it again.
 */
export class AckBatcher {
  readonly #opts: AckBatcherOptions;
  #outbox: PendingAck[] = [];
  #outboxBytes = 0;
  #maxBatchBytes = MAX_BATCH_BYTES;
  #stream: AckStream | undefined;
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  #callsInFlight = 0;

  constructor(options: AckBatcherOptions) {
    this.#opts = options;
  }

  /** Sends `init` in the next batch; resolves with its answer (never rejects). */
  send(init: MessageInitShape<typeof AcknowledgementSchema>): Promise<AckAnswer> {
    const ack = create(AcknowledgementSchema, init);
    const bytes = encodedBytes(ack);
    return new Promise((resolve) => {
      this.#outbox.push({ ack, bytes, settle: resolve });
      this.#outboxBytes += bytes;
      if (this.#outbox.length >= BOUNDS.acks || this.#outboxBytes >= this.#maxBatchBytes) this.#flush();
      else this.#schedule();
    });
  }

  /** The server refused a message as too large (resource_exhausted): send smaller ones from now on. */
  shrink(): void {
    this.#maxBatchBytes = Math.max(MIN_BATCH_BYTES, Math.floor(this.#maxBatchBytes / 2));
  }

  /** The next batch: up to 1000 acknowledgements within the byte limit, at least one. */
  #takeBatch(): PendingAck[] {
    let n = 0;
    let bytes = 0;
    while (n < this.#outbox.length && n < BOUNDS.acks && (n === 0 || bytes + this.#outbox[n].bytes <= this.#maxBatchBytes)) {
      bytes += this.#outbox[n].bytes;
      n++;
    }
    this.#outboxBytes -= bytes;
    return this.#outbox.splice(0, n);
  }

  #putBack(batch: PendingAck[]): void {
    this.#outbox.unshift(...batch);
    for (const p of batch) this.#outboxBytes += p.bytes;
  }

  /** From now on batches go onto `stream`; anything waiting goes at once. */
  useStream(stream: AckStream): void {
    this.#stream = stream;
    if (this.#outbox.length > 0) this.#flush();
  }

  /**
   * Stops using `stream` (if it is the current one), sending what is
   * waiting onto it first when `flushFirst`: close() half-closes the Work
   * stream after its last messages, so they are answered on it.
   */
  leaveStream(stream: AckStream, flushFirst = false): void {
    if (this.#stream !== stream) return;
    if (flushFirst) this.#flush();
    this.#stream = undefined;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    const { windowMs } = this.#opts;
    this.#timer = windowMs > 0 ? setTimeout(() => this.#flush(), windowMs) : setImmediate(() => this.#flush());
  }

  #cancelTimer(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer as NodeJS.Timeout);
    clearImmediate(this.#timer as NodeJS.Immediate);
    this.#timer = undefined;
  }

  #flush(): void {
    this.#cancelTimer();
    while (this.#outbox.length > 0) {
      const stream = this.#stream;
      if (stream !== undefined && stream.ready !== false) {
        const batch = this.#takeBatch();
        if (!stream.send(batch)) {
          this.#putBack(batch);
          this.#stream = undefined;
        }
        continue;
      }
      if (this.#callsInFlight >= MAX_CALLS_IN_FLIGHT) return; // sent when a call returns
      void this.#call(this.#takeBatch());
    }
  }

  async #call(batch: PendingAck[]): Promise<void> {
    this.#callsInFlight++;
    try {
      const res = await this.#opts.client.acknowledge(
        { acks: batch.map((p) => p.ack) },
        { timeoutMs: this.#opts.callTimeoutMs, signal: this.#opts.cutoff },
      );
      this.settleAnswered(batch, res.results, "Acknowledge");
    } catch (e) {
      this.settleFailed(batch, e);
    } finally {
      this.#callsInFlight--;
      if (this.#outbox.length > 0) this.#schedule();
    }
  }

  /**
   * Answers `batch` with the `results` of the unary call (`rpc`:
   * Acknowledge, or Claim carrying acks) that took it, one per
   * acknowledgement in order.
   */
  settleAnswered(batch: PendingAck[], results: AcknowledgementResult[], rpc: string): void {
    if (results.length !== batch.length) {
      const error = new ConnectError(`${rpc} answered ${results.length} results for ${batch.length} acknowledgements`, Code.Internal);
      for (const p of batch) p.settle({ error });
      return;
    }
    batch.forEach((p, i) => p.settle(answerOf(results[i])));
  }

  /**
   * Answers `batch` after the unary call that carried it failed with `e`.
   * A malformed acknowledgement fails the whole request and names its
   * index: nothing of the request was applied, so that one is refused and
   * the others go again. Returns the call's error, or undefined when the
   * refusal was that one acknowledgement's (the call itself is fine).
   */
  settleFailed(batch: PendingAck[], e: unknown): ConnectError | undefined {
    const error = ConnectError.from(e);
    if (error.code === Code.ResourceExhausted) this.shrink();
    const bad = error.code === Code.InvalidArgument ? indexOfBadAck(error) : undefined;
    if (bad !== undefined && bad < batch.length) {
      batch[bad].settle({ error });
      this.#putBack(batch.filter((_, i) => i !== bad));
      this.#schedule();
      return undefined;
    } else {
      // Refused whole (invalid, too large) means nothing was applied; anything else may have been.
      const outcomeUnknown = error.code !== Code.InvalidArgument && error.code !== Code.ResourceExhausted;
      for (const p of batch) p.settle({ error, outcomeUnknown });
    }
    return error;
  }

  /**
   * The next batch waiting, taken now by a carrier about to send one (the
   * unary transport's Claim), without waiting for the window; empty when
   * nothing waits.
   */
  takeNow(): PendingAck[] {
    if (this.#outbox.length === 0) return [];
    const batch = this.#takeBatch();
    if (this.#outbox.length === 0) this.#cancelTimer();
    return batch;
  }

  /** Sends `batch` again, ahead of what waits: taken by a stream that ended before sending it. */
  sendAgain(batch: PendingAck[]): void {
    if (batch.length === 0) return;
    this.#putBack(batch);
    this.#schedule();
  }
}

/**
 * An acknowledgement's size in a request, never under the real one: its
 * fields and their headers, the result encoded (the only part that can be
 * large), the rest counted from string lengths (UTF-8 is at most 3 bytes a
 * UTF-16 unit).
 */
function encodedBytes(ack: Acknowledgement): number {
  const fixed = 48 + ack.jobId.length + ack.leaseToken.length;
  const o = ack.outcome;
  if (o.case === "complete" && o.value.result !== undefined) return fixed + toBinary(ValueSchema, o.value.result).byteLength;
  if (o.case === "fail") return fixed + 3 * o.value.error.length;
  if (o.case === "heartbeat" && o.value.progress !== undefined) return fixed + toBinary(ValueSchema, o.value.progress).byteLength;
  return fixed;
}

/** An AcknowledgementResult as an answer: its status becomes the ConnectError the single RPC would have thrown. */
export function answerOf(result: AcknowledgementResult): AckAnswer {
  const status = result.status;
  if (status === undefined || status.code === 0) {
    return result.leaseExpireTime !== undefined ? { leaseExpireTime: timestampDate(result.leaseExpireTime) } : {};
  }
  return { error: statusError(status) };
}

/** google.rpc.Status -> ConnectError with the same code, message and details (ErrorInfo, BadRequest). */
function statusError(status: Status): ConnectError {
  const code = status.code in Code ? (status.code as Code) : Code.Unknown;
  const error = new ConnectError(status.message, code);
  error.details = status.details.map((any) => ({ type: any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1), value: any.value }));
  return error;
}

/** The `i` of a refusal naming `acks[i]...` in its BadRequest. */
function indexOfBadAck(error: ConnectError): number | undefined {
  for (const bad of error.findDetails(BadRequestSchema)) {
    for (const v of bad.fieldViolations) {
      const m = /^acks\[(\d+)\]/.exec(v.field);
      if (m !== null) return Number(m[1]);
    }
  }
  return undefined;
}
