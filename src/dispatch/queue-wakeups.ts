/**
 * Wakes claimers that wait for work on a queue (long-poll Claim) without
 * polling the database: a committed event that makes a job pending (submit,
 * retry, lease expiry, redrive) wakes the queue's waiters at once, and so
 * does a committed ResumeQueue (api.md section B: leases flow again at
 * once); a timer covers the next delayed job or retry reaching its
 * schedule_time. A paused queue needs nothing here: the store's claim hands
 * out nothing for it, so its claimers simply wait on.
 *
 * Each queue has a generation number that every such commit increments. A
 * claimer reads it before trying to claim and passes it to waitForWork, so a
 * commit that lands between the attempt and the wait is never missed.
 */
import type { Clock } from "../domain/clock.js";
import type { Store } from "../store/store.js";

export class QueueWakeups {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #generation = new Map<string, number>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #listeners = new Set<(queue: string) => void>();
  readonly #unsubscribe: () => void;

  constructor(store: Store, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
    this.#unsubscribe = store.onCommitted(({ events, queueControls }) => {
      // Once per queue and commit: a SubmitBatch of 100 is one wake-up, not 100.
      const queues = new Set<string>();
      for (const e of events) if (e.toState === "queued" || e.toState === "retry") queues.add(e.queue);
      for (const c of queueControls) if (!c.paused) queues.add(c.queue);
      for (const queue of queues) this.#wake(queue);
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

  /**
   * Resolves when work may have become eligible on the queue since
   * `sinceGeneration`, when the next scheduled job is due, at `deadline`
   * (epoch ms) or when `signal` aborts, whichever is first.
   */
  async waitForWork(queue: string, sinceGeneration: number, deadline: number, signal: AbortSignal): Promise<void> {
    if (this.generation(queue) !== sinceGeneration || signal.aborted) return;
    const next = await this.#store.nextScheduledTime(queue);
    if (this.generation(queue) !== sinceGeneration || signal.aborted) return;
    const until = next === null ? deadline : Math.min(deadline, next);
    const delay = Math.max(0, until - this.#clock.now());
    await new Promise<void>((resolve) => {
      let waiters = this.#waiters.get(queue);
      if (waiters === undefined) {
        waiters = new Set();
        this.#waiters.set(queue, waiters);
      }
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(queue) === waiters) this.#waiters.delete(queue);
        resolve();
      };
      const timer = setTimeout(done, delay);
      signal.addEventListener("abort", done, { once: true });
      waiters.add(done);
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
    for (const set of [...this.#waiters.values()]) for (const done of [...set]) done();
  }

  #wake(queue: string): void {
    this.#generation.set(queue, this.generation(queue) + 1);
    for (const listener of this.#listeners) listener(queue);
    const waiters = this.#waiters.get(queue);
    if (waiters === undefined) return;
    for (const done of [...waiters]) done();
  }
}
