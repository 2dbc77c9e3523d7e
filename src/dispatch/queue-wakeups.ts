/**
 * Wakes claimers that wait for work on a queue (long-poll Claim) without
 * polling the database: a committed event that makes a job pending (submit,
 * retry, lease expiry, redrive) wakes the queue's waiters at once, and so
 * does a committed ResumeQueue (api.md section B: leases flow again at
 * once) or a change of the queue's limits (UpdateQueue, api.md section D);
 * a timer covers the next delayed job or retry reaching its schedule_time.
 * A paused queue needs nothing here: the store's claim hands out nothing
 * for it, so its claimers simply wait on.
 *
 * A claim that a queue limit held back (ClaimOutcome.heldBack) waits for
 * what frees a place instead: for max_running, the queue's next lease that
 * finishes (any event that takes a job out of RUNNING, through any server);
 * for rate_limit, a timer at the moment the oldest lease of the window
 * leaves it. Claims held back are counted per queue and limit (metrics).
 *
 * Each queue has a generation number that every commit making work
 * eligible increments, and a count of its finished leases. A claimer reads
 * them before trying to claim and passes them to waitForWork, so a commit
 * that lands between the attempt and the wait is never missed. (Two numbers,
 * so that the leases finishing all the time on a busy queue never send a
 * claimer that is not held back to claim again.)
 */
import type { Clock } from "../domain/clock.js";
import type { ClaimHold, QueueLimit } from "../domain/queue-limits.js";
import type { Store } from "../store/store.js";

/** Claims a limit held back, so far, by queue and limit. */
export interface LimitedClaims {
  queue: string;
  limit: QueueLimit;
  claims: number;
}

/** A claim that a limit held back, as waitForWork needs it. */
export interface HeldClaim {
  hold: ClaimHold;
  /** finishedLeases(queue) read before the claim. */
  finishedSince: number;
}

interface Waiter {
  done: () => void;
  /** Woken by a finishing lease of the queue too (held back by max_running). */
  forPlace: boolean;
}

export class QueueWakeups {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #generation = new Map<string, number>();
  readonly #finished = new Map<string, number>();
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #listeners = new Set<(queue: string) => void>();
  /** By `queue + "\0" + limit`. */
  readonly #limited = new Map<string, LimitedClaims>();
  readonly #unsubscribe: () => void;

  constructor(store: Store, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
    this.#unsubscribe = store.onCommitted(({ events, queueControls }) => {
      // Once per queue and commit: a SubmitBatch of 100 is one wake-up, not 100.
      const queues = new Set<string>();
      const finished = new Set<string>();
      for (const e of events) {
        if (e.toState === "queued" || e.toState === "retry") queues.add(e.queue);
        if (e.fromState === "running" && e.toState !== "running") finished.add(e.queue);
      }
      for (const c of queueControls) if (!c.paused) queues.add(c.queue);
      for (const queue of finished) this.#finished.set(queue, this.finishedLeases(queue) + 1);
      for (const queue of queues) this.#wake(queue);
      for (const queue of finished) if (!queues.has(queue)) this.#placeFreed(queue);
    });
  }

  /** Calls `listener(queue)` whenever work may have become eligible on a queue. */
  onWork(listener: (queue: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  generation(queue: string): number {
    return this.#generation.get(queue) ?? 0;
  }

  /** Leases of the queue that finished so far (committed events that took a job out of RUNNING, through any server). */
  finishedLeases(queue: string): number {
    return this.#finished.get(queue) ?? 0;
  }

  /** Counts a claim that a queue limit held back (every lease path reports its claims' holds here). */
  heldBack(queue: string, hold: ClaimHold): void {
    const key = `${queue}\0${hold.limit}`;
    const entry = this.#limited.get(key);
    if (entry === undefined) this.#limited.set(key, { queue, limit: hold.limit, claims: 1 });
    else entry.claims++;
  }

  /** Claims held back by a limit since the server started, by queue and limit. */
  get limitedClaims(): LimitedClaims[] {
    return [...this.#limited.values()].map((e) => ({ ...e }));
  }

  /**
   * Resolves when work may have become eligible on the queue since
   * `sinceGeneration`, when the next scheduled job is due, at `deadline`
   * (epoch ms) or when `signal` aborts, whichever is first. A claim that a
   * limit held back passes its hold: then it resolves when a lease of the
   * queue finishes (max_running) or when the rate window frees a place
   * (rate_limit), instead of at the next scheduled job.
   */
  async waitForWork(queue: string, sinceGeneration: number, deadline: number, signal: AbortSignal, held?: HeldClaim): Promise<void> {
    const hold = held?.hold;
    const placeFreed = () => hold?.limit === "max_running" && this.finishedLeases(queue) !== held!.finishedSince;
    if (this.generation(queue) !== sinceGeneration || placeFreed() || signal.aborted) return;
    let until = deadline;
    if (hold === undefined) {
      const next = await this.#store.nextScheduledTime(queue);
      if (this.generation(queue) !== sinceGeneration || signal.aborted) return;
      if (next !== null) until = Math.min(deadline, next);
    } else if (hold.limit === "rate_limit") {
      until = Math.min(deadline, hold.until);
    }
    const delay = Math.max(0, until - this.#clock.now());
    await new Promise<void>((resolve) => {
      let waiters = this.#waiters.get(queue);
      if (waiters === undefined) {
        waiters = new Set();
        this.#waiters.set(queue, waiters);
      }
      const waiter: Waiter = {
        forPlace: hold?.limit === "max_running",
        done: () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", waiter.done);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.#waiters.get(queue) === waiters) this.#waiters.delete(queue);
          resolve();
        },
      };
      const timer = setTimeout(waiter.done, delay);
      signal.addEventListener("abort", waiter.done, { once: true });
      waiters.add(waiter);
    });
  }

  /** Number of claimers currently waiting, over all queues. */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  close(): void {
    this.#unsubscribe();
    this.#listeners.clear();
    for (const set of [...this.#waiters.values()]) for (const w of [...set]) w.done();
  }

  #wake(queue: string): void {
    this.#generation.set(queue, this.generation(queue) + 1);
    for (const listener of this.#listeners) listener(queue);
    const waiters = this.#waiters.get(queue);
    if (waiters === undefined) return;
    for (const w of [...waiters]) w.done();
  }

  /** A lease of the queue finished: a claim held back by max_running may get its place now. */
  #placeFreed(queue: string): void {
    const waiters = this.#waiters.get(queue);
    if (waiters === undefined) return;
    for (const w of [...waiters]) if (w.forPlace) w.done();
  }
}
