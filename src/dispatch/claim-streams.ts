/**
 * StreamClaims: pushes leases to long-lived worker streams as jobs become
 * eligible, never more than `maxInFlight` unfinished leases per stream.
 */
import type { Clock } from "../domain/clock.js";
import type { EventKind } from "../domain/job.js";
import { freedByFinishingLease, holdUntil, type ClaimHold } from "../domain/queue-limits.js";
import { KEEPALIVE_INTERVAL_MS, timerDelay } from "../domain/timing-defaults.js";
import type { Logger } from "../logger.js";
import type { ClaimedLease, Store } from "../store/store.js";
import type { QueueWakeups } from "./queue-wakeups.js";
import { releaseUnsent } from "./unsent-leases.js";
import { Wakeup } from "./wakeup.js";

export interface ClaimStreamSpec {
  queue: string;
  workerId: string;
  leaseDurationMs: number;
  maxInFlight: number;
}

export interface ClaimStreamsOptions {
  store: Store;
  wakeups: QueueWakeups;
  clock: Clock;
  log: Logger;
  /** Idle interval between keepalive messages. Default 15 s. */
  keepaliveMs?: number;
}

/** Store calls claim at most this many jobs at once (the bound of maxJobs in docs/api.md "Bounds"). */
const MAX_CLAIM_BATCH = 100;
/** After a failed claim (database unavailable), try again this much later. */
const RETRY_AFTER_ERROR_MS = 1000;

/** Events after which a lease no longer counts against its stream. */
const LEASE_FINISHED: ReadonlySet<EventKind> = new Set([
  "completed",
  "failed",
  "dead_lettered",
  "cancelled",
  "lease_expired",
  "released",
  "snoozed",
]);

/** A message of a stream from {@link ClaimStreams.open}: a lease, a job of the stream cancelled while running, or `null` for a keepalive. */
export type ClaimStreamMessage = ClaimedLease | { cancelledJobId: string } | null;

/** A stream registered with {@link ClaimStreams.register}. */
export interface ClaimStreamHandle {
  /** Every lease claimed for the stream and not taken yet; taking one counts as sending it. */
  takeReady(): ClaimedLease[];
  /** The jobs whose leases this stream sent and that were cancelled while running since the last call (docs/api.md "Cancelling a running job"). */
  takeCancelled(): string[];
  /** Resolves true when leases became ready or wake() was called; false after `ms` or on abort. */
  wait(ms: number, signal: AbortSignal): Promise<boolean>;
  /** Wakes the waiter. */
  wake(): void;
  /** Unregisters: leases not taken are released; taken ones stay with the worker. */
  close(): void;
}

class ClaimStream extends Wakeup {
  /** Leases handed out (or claimed and about to be) and not yet finished. */
  readonly inFlight = new Set<string>();
  /** Claimed for this stream, not yet sent. */
  readonly ready: ClaimedLease[] = [];
  /** Sent leases whose jobs were cancelled while running, for the worker to be told. */
  readonly cancelled: string[] = [];
  closed = false;

  constructor(readonly spec: ClaimStreamSpec) {
    super();
  }

  get room(): number {
    return this.spec.maxInFlight - this.inFlight.size;
  }
}

interface QueueState {
  /** Insertion order is the ring order. */
  readonly subscribers: Set<ClaimStream>;
  pumping: boolean;
  again: boolean;
  timer: NodeJS.Timeout | undefined;
  /** The last claim was held back by max_running: the queue's next finishing lease pumps again. */
  waitingForPlace: boolean;
}

/**
 * - One pump per queue claims on behalf of the streams that have room, in
 *   ring order (a stream that just got work goes to the back), so several
 *   streams on one queue share the work and a new job costs one claim, not
 *   one per waiting stream.
 * - The pump runs when a stream opens, when a commit makes work eligible on
 *   the queue (QueueWakeups), when a lease of one of its streams finishes, and
 *   on a timer for the next delayed job, snoozed job or retry. The timer is
 *   set by the time the pump's last claim read in its own transaction
 *   (ClaimOutcome.nextScheduleTime), never by a later reading: a job that
 *   became due between the two would be in neither. Idle streams cost
 *   nothing: no polling loop touches the database.
 * - A lease counts against its stream until a committed event finishes it:
 *   completed, failed, dead-lettered, cancelled, released, snoozed or lease
 *   expired.
 * - When a stream ends, the leases it sent stay owned by the worker until
 *   they are acknowledged or expire; nothing is handed out twice. Leases it
 *   claimed but had not sent yet are released (attempt refunded).
 * - A paused queue (docs/api.md "Queue controls") needs no state here: the
 *   store's claim hands out nothing for it, so its streams park until a
 *   commit resumes it (QueueWakeups wakes the queue). When a pause commits,
 *   the leases claimed before it but not sent yet are released, so none goes
 *   out after the pause.
 * - A queue limit (docs/api.md "Queue limits") that holds a claim back parks
 *   the pump until what frees a place: the queue's next finishing lease, of
 *   any worker on any server (max_running), or the moment the rate window
 *   frees one (rate_limit, a timer). A change of the limits wakes it like a
 *   resume.
 */
export class ClaimStreams {
  readonly #opts: Required<ClaimStreamsOptions>;
  readonly #queues = new Map<string, QueueState>();
  readonly #owners = new Map<string, ClaimStream>();
  readonly #unsubscribe: Array<() => void>;

  constructor(options: ClaimStreamsOptions) {
    this.#opts = { ...options, keepaliveMs: options.keepaliveMs ?? KEEPALIVE_INTERVAL_MS };
    this.#unsubscribe = [
      options.wakeups.onWork((queue) => this.#pump(queue)),
      options.store.onCommitted(({ events, queueControls }) => {
        for (const c of queueControls) if (c.paused) this.#releaseReady(c.queue);
        for (const e of events) {
          if (e.fromState === "running" && e.toState !== "running") this.#placeFreed(e.queue);
          if (!LEASE_FINISHED.has(e.kind)) continue;
          const owner = this.#owners.get(e.jobId);
          if (owner === undefined) continue;
          this.#owners.delete(e.jobId);
          owner.inFlight.delete(e.jobId);
          if (e.kind === "cancelled" && e.fromState === "running") this.#leaseCancelled(owner, e.jobId);
          this.#pump(owner.spec.queue);
        }
      }),
    ];
  }

  /** Open streams, over all queues. */
  get streams(): number {
    let n = 0;
    for (const q of this.#queues.values()) n += q.subscribers.size;
    return n;
  }

  /**
   * Registers a stream at once and returns its messages: a lease, or `null`
   * for a keepalive. The first message is a keepalive, so the transport sends
   * the response headers as soon as the stream is registered.
   */
  open(spec: ClaimStreamSpec, signal: AbortSignal): AsyncIterable<ClaimStreamMessage> {
    const { sub, close } = this.#register(spec, signal);
    return this.#messages(sub, signal, close);
  }

  /**
   * Registers a stream that takes its leases in batches (the Work stream) and
   * whose waiter may also be woken for other reasons (acknowledgement results
   * to send). The caller must call `close()` when the stream ends; aborting
   * `signal` closes it too.
   */
  register(spec: ClaimStreamSpec, signal: AbortSignal): ClaimStreamHandle {
    const { sub, close } = this.#register(spec, signal);
    return {
      takeReady: () => sub.ready.splice(0),
      takeCancelled: () => sub.cancelled.splice(0),
      wait: (ms, waitSignal) => sub.wait(ms, waitSignal),
      wake: () => sub.wake(),
      close: () => {
        signal.removeEventListener("abort", close);
        close();
      },
    };
  }

  #register(spec: ClaimStreamSpec, signal: AbortSignal): { sub: ClaimStream; close: () => void } {
    const sub = new ClaimStream(spec);
    let state = this.#queues.get(spec.queue);
    if (state === undefined) {
      state = { subscribers: new Set(), pumping: false, again: false, timer: undefined, waitingForPlace: false };
      this.#queues.set(spec.queue, state);
    }
    state.subscribers.add(sub);
    const close = () => this.#close(sub);
    signal.addEventListener("abort", close, { once: true });
    this.#pump(spec.queue);
    return { sub, close };
  }

  close(): void {
    for (const off of this.#unsubscribe) off();
    for (const state of this.#queues.values()) {
      clearTimeout(state.timer);
      for (const sub of state.subscribers) sub.wake();
    }
  }

  async *#messages(sub: ClaimStream, signal: AbortSignal, close: () => void): AsyncGenerator<ClaimStreamMessage> {
    try {
      yield null;
      while (!signal.aborted && !sub.closed) {
        const cancelledJobId = sub.cancelled.shift();
        if (cancelledJobId !== undefined) {
          yield { cancelledJobId };
          continue;
        }
        const lease = sub.ready.shift();
        if (lease !== undefined) {
          yield lease;
          continue;
        }
        const woken = await sub.wait(this.#opts.keepaliveMs, signal);
        if (!woken && !signal.aborted) yield null;
      }
    } finally {
      signal.removeEventListener("abort", close);
      close();
    }
  }

  #close(sub: ClaimStream): void {
    if (sub.closed) return;
    sub.closed = true;
    // Leases that were sent stay with the worker until acknowledged or
    // expired; the stream just stops counting them. Leases never sent go back.
    for (const id of sub.inFlight) if (this.#owners.get(id) === sub) this.#owners.delete(id);
    this.#releaseUnsent(sub.ready.splice(0));
    const state = this.#queues.get(sub.spec.queue);
    if (state === undefined) return;
    state.subscribers.delete(sub);
    if (state.subscribers.size === 0 && !state.pumping) {
      clearTimeout(state.timer);
      this.#queues.delete(sub.spec.queue);
    }
  }

  #pump(queue: string): void {
    const state = this.#queues.get(queue);
    if (state === undefined) return;
    if (state.pumping) {
      state.again = true;
      return;
    }
    state.pumping = true;
    void this.#drain(queue, state)
      .catch((err: unknown) => {
        this.#opts.log.error("claim pump failed; retrying", { queue, error: err });
        this.#schedule(queue, state, this.#opts.clock.now() + RETRY_AFTER_ERROR_MS);
      })
      .finally(() => {
        state.pumping = false;
        if (state.subscribers.size === 0) {
          clearTimeout(state.timer);
          if (this.#queues.get(queue) === state) this.#queues.delete(queue);
        } else if (state.again) {
          this.#pump(queue);
        }
      });
  }

  async #drain(queue: string, state: QueueState): Promise<void> {
    const { store, clock, log, wakeups } = this.#opts;
    do {
      state.again = false;
      state.waitingForPlace = false;
      let drained = false;
      let hold: ClaimHold | null = null;
      let nextScheduleTime: number | null = null;
      let finishedSince = 0;
      for (const sub of [...state.subscribers]) {
        if (sub.closed || sub.room <= 0) continue;
        const ask = Math.min(sub.room, MAX_CLAIM_BATCH);
        let leases: ClaimedLease[];
        try {
          finishedSince = wakeups.finishedLeases(queue);
          ({ leases, heldBack: hold, nextScheduleTime } = await store.claimOutcome({ ...sub.spec, maxJobs: ask }));
        } catch (err) {
          log.warn("stream claim failed; retrying", { queue, error: err });
          this.#schedule(queue, state, clock.now() + RETRY_AFTER_ERROR_MS);
          return;
        }
        if (leases.length > 0) {
          if (sub.closed) {
            // The stream ended while its claim committed: nobody can get these.
            this.#releaseUnsent(leases);
          } else {
            for (const lease of leases) {
              sub.inFlight.add(lease.job.id);
              this.#owners.set(lease.job.id, sub);
              sub.ready.push(lease);
            }
            state.subscribers.delete(sub);
            state.subscribers.add(sub);
          }
          sub.wake();
        }
        if (hold !== null) wakeups.heldBack(queue, hold);
        if (leases.length < ask) {
          drained = true;
          break;
        }
        if (sub.room > 0) state.again = true;
      }
      if (!drained || ![...state.subscribers].some((s) => s.room > 0)) continue;
      if (hold !== null) {
        const until = holdUntil(hold);
        if (freedByFinishingLease(hold)) {
          // A lease that finished while the claim ran has already freed its place.
          if (wakeups.finishedLeases(queue) !== finishedSince) state.again = true;
          else state.waitingForPlace = true;
        }
        if (until !== null && !state.again) this.#schedule(queue, state, until);
      } else if (nextScheduleTime !== null) {
        // Read by the claim at its own time: a job that became due since is
        // claimed at once, and one that commits later wakes the queue.
        this.#schedule(queue, state, nextScheduleTime);
      }
    } while (state.again);
  }

  /**
   * A job this stream holds was cancelled while running: a lease not sent
   * yet is dropped (the job is over, there is nothing to release); a sent
   * one is reported to the stream, which tells its worker.
   */
  #leaseCancelled(sub: ClaimStream, jobId: string): void {
    const unsent = sub.ready.findIndex((l) => l.job.id === jobId);
    if (unsent !== -1) {
      sub.ready.splice(unsent, 1);
      return;
    }
    sub.cancelled.push(jobId);
    sub.wake();
  }

  /** A lease of the queue finished (of any stream, worker or server): a pump held back by max_running claims again. */
  #placeFreed(queue: string): void {
    const state = this.#queues.get(queue);
    if (state === undefined || !state.waitingForPlace) return;
    state.waitingForPlace = false;
    this.#pump(queue);
  }

  /** Releases what the queue's streams claimed but have not sent (their released events free their room). */
  #releaseReady(queue: string): void {
    const state = this.#queues.get(queue);
    if (state === undefined) return;
    for (const sub of state.subscribers) this.#releaseUnsent(sub.ready.splice(0));
  }

  /** Gives back leases claimed for a stream but never sent (unsent-leases.ts). */
  #releaseUnsent(leases: ClaimedLease[]): void {
    if (leases.length > 0) void releaseUnsent(this.#opts.store, this.#opts.log, leases);
  }

  /** Pumps the queue again at `at` (epoch ms), replacing an earlier timer. */
  #schedule(queue: string, state: QueueState, at: number): void {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => this.#pump(queue), timerDelay(at - this.#opts.clock.now()));
    state.timer.unref();
  }
}
