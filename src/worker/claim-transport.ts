/**
 * The unary transport (docs/writing-a-worker.md, "The path it takes"): no
 * stream at all, for networks that pass only plain request/response calls.
 * One Claim at a time asks for as many leases as the worker has free
 * slots and carries acknowledgements batched since the last one
 * (docs/api.md "Claim with acks"), so while the queue has work a job costs
 * one Claim besides its Submit.
 */
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { BOUNDS } from "../domain/request-bounds.js";
import { ACK_ANSWER_TIMEOUT_MS, type AckBatcher, type AckStream, type PendingAck } from "./ack-batcher.js";
import type { LeaseTransport, LeaseTransportOptions } from "./lease-transport.js";

/** How long a Claim carrying no acknowledgement waits for work (the server allows up to 60 s). */
export const CLAIM_WAIT_MS = 20_000;

export interface ClaimTransportOptions extends LeaseTransportOptions {
  acks: AckBatcher;
  /** Leases the worker can start now: its concurrency less the handlers running and the leases waiting for a slot. */
  room(): number;
}

/**
 * - A Claim carrying acknowledgements does not wait (`wait` 0), so their
 *   results come back at once; the next Claim, carrying none, is the one
 *   that long-polls. The first Claim of a connection does not wait either:
 *   its answer reports the worker connected.
 * - Acknowledgements never wait for a long-poll: while one is pending, and
 *   while no slot is free (a Claim cannot ask for no lease), the batcher
 *   sends them by Acknowledge (`ready` is false).
 * - A Claim takes what the batcher holds when it leaves, without waiting
 *   for the batch window; batches the batcher hands over while a Claim
 *   that answers at once is on its way ride the next one. Batches taken
 *   for a Claim that is not sent (no slot free when it was due, close(),
 *   a failed Claim) go back to the batcher.
 */
export class ClaimTransport implements LeaseTransport, AckStream {
  readonly #opts: ClaimTransportOptions;
  /** Batches taken for the next Claims, oldest first; each Claim carries one. */
  #outgoing: PendingAck[][] = [];
  /** The Claim on its way: none, one that answers at once, or a long-poll. */
  #inFlight: "none" | "prompt" | "waiting" = "none";
  /** Cancels the Claim on its way (close() during a long-poll). */
  #call: AbortController | undefined;
  #wake: (() => void) | undefined;
  /** A Claim has answered since once() began: batches are taken. */
  #open = false;

  constructor(options: ClaimTransportOptions) {
    this.#opts = options;
  }

  /** A Claim goes out soon: one answering at once is on its way, or none is and a slot is free. */
  get ready(): boolean {
    if (!this.#open || this.#inFlight === "waiting") return false;
    return this.#inFlight === "prompt" || this.#opts.room() > 0;
  }

  send(batch: PendingAck[]): boolean {
    if (!this.#open) return false;
    this.#outgoing.push(batch);
    this.#wake?.();
    return true;
  }

  /** The worker's free slots changed (a handler returned, a lease went): a Claim may be due. */
  roomChanged(): void {
    this.#wake?.();
  }

  async once(connected: () => void): Promise<ConnectError | undefined> {
    const { closing, acks } = this.#opts;
    const stop = () => {
      if (this.#inFlight === "waiting") this.#call?.abort();
      this.#wake?.();
    };
    closing.addEventListener("abort", stop, { once: true });
    try {
      while (!closing.aborted) {
        const room = this.#opts.room();
        if (room === 0) {
          this.#giveBack();
          await new Promise<void>((resolve) => (this.#wake = resolve));
          this.#wake = undefined;
          continue;
        }
        // What the batcher holds rides along now rather than after its window.
        const batch = this.#outgoing.shift() ?? acks.takeNow();
        const error = await this.#claim(batch, room, connected);
        if (error !== undefined) return closing.aborted ? undefined : error;
      }
      return undefined;
    } finally {
      closing.removeEventListener("abort", stop);
      this.#open = false;
      acks.leaveStream(this);
      this.#giveBack();
    }
  }

  /** Nothing to cut: close() cancels a pending long-poll, and a Claim that answers at once is let finish. */
  abandon(): void {}

  /** One Claim carrying `batch` for up to `room` leases; returns how it failed, if it did (not for one refused acknowledgement). */
  async #claim(batch: PendingAck[], room: number, connected: () => void): Promise<ConnectError | undefined> {
    const { client, acks } = this.#opts;
    // The first Claim answers at once too: it tells the worker it is connected.
    const waitMs = batch.length > 0 || !this.#open ? 0 : CLAIM_WAIT_MS;
    const call = new AbortController();
    this.#call = call;
    this.#inFlight = waitMs > 0 ? "waiting" : "prompt";
    let res;
    try {
      res = await client.claim(
        {
          queue: this.#opts.queue,
          workerId: this.#opts.workerId,
          leaseDuration: durationFromMs(this.#opts.leaseDurationMs),
          maxJobs: Math.min(room, BOUNDS.maxJobs[1]),
          wait: durationFromMs(waitMs),
          acks: batch.map((p) => p.ack),
        },
        { signal: call.signal, timeoutMs: waitMs + ACK_ANSWER_TIMEOUT_MS },
      );
    } catch (e) {
      return acks.settleFailed(batch, e);
    } finally {
      this.#call = undefined;
      this.#inFlight = "none";
    }
    if (!this.#open) {
      this.#open = true;
      if (!this.#opts.closing.aborted) acks.useStream(this);
      connected();
    }
    acks.settleAnswered(batch, res.results, "Claim");
    for (const lease of res.leases) this.#opts.accept(lease);
    return undefined;
  }

  /** Hands the batches taken for Claims back to the batcher, in order: a Claim due soon takes them, else Acknowledge. */
  #giveBack(): void {
    this.#opts.acks.sendAgain(this.#outgoing.splice(0).flat());
  }
}
