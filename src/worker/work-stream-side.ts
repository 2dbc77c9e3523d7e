/**
 * The worker's side of one Work stream
 * (docs/api.md "The batched path: Acknowledge and Work"): the request
 * messages it writes (`start` first, then batches of acknowledgements) and
 * the acknowledgements still waiting for their results, which the server
 * sends in the order the acknowledgements arrived.
 *
 * When the stream ends before answering some of them (a reset, a server
 * restart, a watchdog), each is answered `unavailable`: nobody knows
 * whether it was applied, so the caller sends it again (on the next stream
 * or with Acknowledge) while its lease lasts.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  WorkRequestSchema,
  type AcknowledgementResult,
  type WorkRequest,
  type WorkStart,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { answerOf, type AckStream, type PendingAck } from "./ack-batcher.js";

export class WorkStreamSide implements AckStream {
  readonly #controller = new AbortController();
  readonly #outgoing: WorkRequest[];
  #wake: (() => void) | undefined;
  /** No more messages: half-closed by close(), or failed. */
  #ended = false;
  #failure: ConnectError | undefined;
  /** Sent, in order, waiting for their results, with when they were written. */
  #unanswered: Array<{ pending: PendingAck; sentAt: number }> = [];
  #head = 0;

  constructor(start: WorkStart) {
    this.#outgoing = [create(WorkRequestSchema, { start })];
  }

  /** Cancels the call when the stream fails on this side. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why this side gave up on the stream, when it did. */
  get failure(): ConnectError | undefined {
    return this.#failure;
  }

  /** When the oldest unanswered acknowledgement was handed to this stream (performance.now()), if any. */
  get oldestUnansweredAt(): number | undefined {
    return this.#unanswered[this.#head]?.sentAt;
  }

  /** The request messages, for `client.work()`; ends after halfClose() once everything queued is written. */
  async *requests(): AsyncGenerator<WorkRequest> {
    for (;;) {
      const next = this.#outgoing.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  send(batch: PendingAck[]): boolean {
    if (this.#ended) return false;
    this.#outgoing.push(create(WorkRequestSchema, { acks: batch.map((p) => p.ack) }));
    const sentAt = performance.now();
    for (const pending of batch) this.#unanswered.push({ pending, sentAt });
    this.#wake?.();
    return true;
  }

  /** Answers the oldest acknowledgements with `results`; throws when they do not line up (a protocol error). */
  takeResults(results: AcknowledgementResult[]): void {
    for (const result of results) {
      const pending = this.#unanswered[this.#head]?.pending;
      if (pending === undefined || pending.ack.jobId !== result.jobId) {
        throw new ConnectError(
          `the Work stream answered job ${result.jobId} where ${pending === undefined ? "no acknowledgement" : `job ${pending.ack.jobId}`} was due`,
          Code.Internal,
        );
      }
      this.#unanswered[this.#head++] = undefined as never;
      if (this.#head > 1024 && this.#head * 2 > this.#unanswered.length) {
        this.#unanswered = this.#unanswered.slice(this.#head);
        this.#head = 0;
      }
      pending.settle(answerOf(result));
    }
  }

  /** Writes nothing more: the server answers what it has and ends the stream with OK. */
  halfClose(): void {
    this.#ended = true;
    this.#wake?.();
  }

  /**
   * The stream is over (`cause` says how it broke, or that it ended):
   * cancels the call if it still runs, and answers every unanswered
   * acknowledgement `unavailable`.
   */
  fail(cause: ConnectError): void {
    this.#failure ??= cause;
    this.#ended = true;
    this.#wake?.();
    this.#controller.abort(cause);
    const unanswered = this.#unanswered.slice(this.#head).map((u) => u.pending);
    this.#unanswered = [];
    this.#head = 0;
    if (unanswered.length === 0) return;
    const error = new ConnectError(
      `the Work stream ended before this acknowledgement was answered: ${cause.rawMessage}`,
      Code.Unavailable,
      undefined,
      undefined,
      cause,
    );
    for (const p of unanswered) p.settle({ error, outcomeUnknown: true });
  }
}
