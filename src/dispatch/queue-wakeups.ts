/**
 * Wakes claimers that wait for work on a queue (long-poll Claim) without
 * polling the database: a committed event that makes a job pending (submit,
 * retry, lease expiry, redrive) wakes the queue's waiters at once, and so
 * does a committed ResumeQueue (docs/api.md "Queue controls": leases flow
 * again at once) or a change of the queue's limits (UpdateQueue, docs/api.md
 * "Queue limits"); a timer covers the next delayed job or retry reaching its
 * schedule_time, at the time the claim before the wait read in its own
 * transaction (ClaimOutcome.nextScheduleTime). A paused queue needs nothing
 * here: the store's claim hands out nothing for it, so its claimers simply
 * wait on.
 */
import type { Clock } from "../domain/clock.js";
import { freedByFinishingLease, holdUntil, type ClaimHold, type QueueLimit } from "../domain/queue-limits.js";
import { timerDelay } from "../domain/timing-defaults.js";
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

/** What the claim before a wait found (its ClaimOutcome), as waitForWork needs it. */
export interface ClaimFound {
  /** The limit that held the claim back (ClaimOutcome.heldBack), if one did. */
  held?: HeldClaim;
  /** ClaimOutcome.nextScheduleTime: when the queue's next job becomes eligible, as the claim read it. */
  nextScheduleTime?: number | null;
}

interface Waiter {
  /** Ends the wait; `woken`: by work or a freed place (not the timer or the signal). */
  done: (woken?: boolean) => void;
  /** Woken by a finishing lease of the queue too (held back by max_running). */
  forPlace: boolean;
}

/**
 * A claim that a queue limit or a group rule held back (ClaimOutcome.heldBack)
 * waits for what frees a place instead: for max_running, the queue's next
 * lease that finishes (any event that takes a job out of RUNNING, through
 * any server); for rate_limit, a timer at the moment the oldest lease of the
 * window leaves it; for a group hold, either or both, as the hold says
 * (domain/queue-limits.ts freedByFinishingLease, holdUntil). Claims held back
 * are counted per queue and limit (metrics).
 *
 * Each queue has a generation number that every commit making work
 * eligible increments, and a count of its finished leases. A claimer reads
 * them before trying to claim and passes them to waitForWork, so a commit
 * that lands between the attempt and the wait is never missed. (Two numbers,
 * so that the leases finishing all the time on a busy queue never send a
 * claimer that is not held back to claim again.)
 */
export class QueueWakeups {
  readonly #clock: Clock;
  readonly #generation = new Map<string, number>();
  readonly #finished = new Map<string, number>();
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #listeners = new Set<(queue: string) => void>();
  /** By `queue + "\0" + limit`. */
  readonly #limited = new Map<string, LimitedClaims>();
  readonly #unsubscribe: () => void;

  constructor(store: Store, clock: Clock) {
    this.#clock = clock;
    this.#unsubscribe = store.onCommitted(({ events, queueControls }) => {
      // Once per queue and commit: a SubmitBatch of 100 is one wake-up, not
      // 100. How many of the queue's waiters it wakes: one per job that
      // became pending (Infinity: all of them, for a resume or new limits).
      const pending = new Map<string, number>();
      const finished = new Set<string>();
      for (const e of events) {
        if (e.toState === "queued" || e.toState === "retry") pending.set(e.queue, (pending.get(e.queue) ?? 0) + 1);
        if (e.fromState === "running" && e.toState !== "running") finished.add(e.queue);
      }
      for (const c of queueControls) if (!c.paused) pending.set(c.queue, Infinity);
      for (const queue of finished) this.#finished.set(queue, this.finishedLeases(queue) + 1);
      for (const [queue, jobs] of pending) this.#wake(queue, jobs);
      for (const queue of finished) if (!pending.has(queue)) this.#placeFreed(queue);
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
   * (epoch ms) or when `signal` aborts, whichever is first. The next
   * scheduled job is the one the claim before the wait found
   * (`found.nextScheduleTime`, read in the claim's transaction at its time):
   * a job that became due after the claim looked is in it, and one that
   * committed after the claim moved the generation. A claim that a limit
   * held back passes its hold (`found.held`): then it resolves when a lease
   * of the queue finishes (max_running) or when the rate window frees a
   * place (rate_limit), instead of at the next scheduled job. Answers true
   * when work (or a place) woke it: a claimer that then does not claim (its
   * caller went away) hands the wake on (handOn), so the job is not left to
   * wait for the others' timers.
   */
  waitForWork(queue: string, sinceGeneration: number, deadline: number, signal: AbortSignal, found: ClaimFound = {}): Promise<boolean> {
    const { held, nextScheduleTime = null } = found;
    const hold = held?.hold;
    const forPlace = hold !== undefined && freedByFinishingLease(hold);
    const placeFreed = () => forPlace && this.finishedLeases(queue) !== held!.finishedSince;
    if (signal.aborted) return Promise.resolve(false);
    if (this.generation(queue) !== sinceGeneration || placeFreed()) return Promise.resolve(true);
    let until = deadline;
    if (hold === undefined) {
      if (nextScheduleTime !== null) until = Math.min(deadline, nextScheduleTime);
    } else {
      const at = holdUntil(hold);
      if (at !== null) until = Math.min(deadline, at);
    }
    const delay = timerDelay(until - this.#clock.now());
    return new Promise<boolean>((resolve) => {
      let waiters = this.#waiters.get(queue);
      if (waiters === undefined) {
        waiters = new Set();
        this.#waiters.set(queue, waiters);
      }
      const waiter: Waiter = {
        forPlace,
        done: (woken = false) => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.#waiters.get(queue) === waiters) this.#waiters.delete(queue);
          resolve(woken);
        },
      };
      const onAbort = () => waiter.done();
      const timer = setTimeout(() => waiter.done(), delay);
      signal.addEventListener("abort", onAbort, { once: true });
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

  /**
   * Work may have become eligible on the queue: the generation moves (so a
   * claimer between its attempt and its wait claims again), listeners are
   * told, and up to `jobs` waiters wake, longest-waiting first. Waking every
   * waiter for one new job would send all of them to claim it and all but
   * one back to wait (with 16 long-polling workers, 16 claim transactions
   * per job). One that wakes and finds nothing (another path took the job)
   * waits again; a job whose waiter went away before claiming it is
   * released, and its RELEASED event wakes the next one.
   */
  #wake(queue: string, jobs: number): void {
    this.#generation.set(queue, this.generation(queue) + 1);
    for (const listener of this.#listeners) listener(queue);
    const waiters = this.#waiters.get(queue);
    if (waiters === undefined) return;
    let left = jobs;
    // A Set iterates in insertion order: the longest-waiting first.
    for (const w of [...waiters]) {
      if (left <= 0) break;
      w.done(true);
      left--;
    }
  }

  /** A claimer woken for work will not claim it (its caller went away): the next waiter of the queue gets the wake. */
  handOn(queue: string): void {
    const next = this.#waiters.get(queue)?.values().next();
    if (next !== undefined && next.done !== true) next.value.done(true);
  }

  /** A lease of the queue finished: a claim held back by max_running may get its place now. */
  #placeFreed(queue: string): void {
    const waiters = this.#waiters.get(queue);
    if (waiters === undefined) return;
    for (const w of [...waiters]) if (w.forPlace) w.done(true);
  }
}
