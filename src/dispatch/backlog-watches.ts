/**
 * Tells a stream that follows one queue's backlog (KEDA's StreamIsActive,
 * docs/operations.md "Autoscaling workers") when to read it again, without
 * polling the database: a committed change of the queue (a job changed
 * state, the queue was paused or resumed) announced by the store, whichever
 * server committed it (on PostgreSQL other servers' commits arrive through
 * the store's notifications), or the moment the queue's next waiting job
 * becomes eligible, which no commit announces (the time the last read
 * found, Store.queueBacklog's nextEligibleTime).
 */
import type { Clock } from "../domain/clock.js";
import { timerDelay } from "../domain/timing-defaults.js";
import type { CommittedChange, Store } from "../store/store.js";

export interface BacklogWatchesOptions {
  /** Least time between two wake-ups of one watch, in ms; default 250 (a change is read well within a second). */
  minIntervalMs?: number;
}

export const DEFAULT_BACKLOG_MIN_INTERVAL_MS = 250;

/** One stream's view of one queue. */
export interface BacklogWatch {
  /**
   * Resolves true when the queue may have changed since the previous call
   * resolved (the first call: since the watch began), or when `until`
   * (epoch ms on the store's clock; null: never) comes; never sooner than
   * the minimum interval after the previous call resolved. Resolves false
   * when `signal` aborts, or the watch or its BacklogWatches close.
   */
  next(until: number | null, signal: AbortSignal): Promise<boolean>;
  /** Stops following the queue (a pending next() resolves false). */
  close(): void;
}

/**
 * A busy queue commits thousands of times a second: a watch is woken at
 * most once per `minIntervalMs`, so a burst of commits costs one read, and
 * the first change after a quiet spell is read at once. A commit that lands
 * while the stream reads is not lost: the next wait returns at once.
 */
export class BacklogWatches {
  readonly #clock: Clock;
  readonly #minIntervalMs: number;
  readonly #byQueue = new Map<string, Set<QueueWatch>>();
  readonly #unsubscribe: () => void;

  constructor(store: Store, clock: Clock, options: BacklogWatchesOptions = {}) {
    this.#clock = clock;
    this.#minIntervalMs = options.minIntervalMs ?? DEFAULT_BACKLOG_MIN_INTERVAL_MS;
    this.#unsubscribe = store.onCommitted((change) => {
      if (this.#byQueue.size === 0) return;
      for (const queue of changedQueues(change)) for (const watch of this.#byQueue.get(queue) ?? []) watch.changed();
    });
  }

  /** Follows `queue` from now on: commits announced after this call wake the watch. */
  watch(queue: string): BacklogWatch {
    let watches = this.#byQueue.get(queue);
    if (watches === undefined) {
      watches = new Set();
      this.#byQueue.set(queue, watches);
    }
    const watch = new QueueWatch(this.#clock, this.#minIntervalMs, () => {
      watches.delete(watch);
      if (watches.size === 0 && this.#byQueue.get(queue) === watches) this.#byQueue.delete(queue);
    });
    watches.add(watch);
    return watch;
  }

  /** Watches open, over all queues. */
  get watching(): number {
    let n = 0;
    for (const set of this.#byQueue.values()) n += set.size;
    return n;
  }

  /** Stops listening to the store; every watch's pending wait resolves false. */
  close(): void {
    this.#unsubscribe();
    for (const set of [...this.#byQueue.values()]) for (const watch of [...set]) watch.close();
  }
}

/**
 * The queues whose backlog a commit may have changed: those of its state
 * changes (a heartbeat or a progress report changes no count) and of its
 * queue controls (a pause or a resume).
 */
function changedQueues(change: CommittedChange): Set<string> {
  const queues = new Set<string>();
  for (const e of change.events) if (e.fromState !== e.toState) queues.add(e.queue);
  for (const c of change.queueControls) queues.add(c.queue);
  return queues;
}

class QueueWatch implements BacklogWatch {
  readonly #clock: Clock;
  readonly #minIntervalMs: number;
  readonly #onClose: () => void;
  /** A change was announced since the last wake-up. */
  #changed = false;
  #closed = false;
  /** performance.now() of the last wake-up: the interval is real time, whatever the store's clock says. */
  #lastWake = -Infinity;
  /** Set while next() waits: tells it of a change or of closing. */
  #notify: (() => void) | undefined;

  constructor(clock: Clock, minIntervalMs: number, onClose: () => void) {
    this.#clock = clock;
    this.#minIntervalMs = minIntervalMs;
    this.#onClose = onClose;
  }

  changed(): void {
    this.#changed = true;
    this.#notify?.();
  }

  next(until: number | null, signal: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.#closed || signal.aborted) {
        resolve(false);
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.#notify = undefined;
        if (woken) {
          this.#changed = false;
          this.#lastWake = performance.now();
        }
        resolve(woken);
      };
      const onAbort = () => finish(false);
      // Woken for a change (or `until`): at once, or when the interval since the last wake-up has passed.
      const wake = () => {
        clearTimeout(timer);
        const wait = this.#lastWake + this.#minIntervalMs - performance.now();
        if (wait <= 0) {
          finish(true);
          return;
        }
        this.#notify = () => {
          if (this.#closed) finish(false);
        };
        timer = setTimeout(() => finish(true), wait);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      if (this.#changed) {
        wake();
        return;
      }
      this.#notify = () => (this.#closed ? finish(false) : wake());
      if (until !== null) timer = setTimeout(wake, timerDelay(until - this.#clock.now()));
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose();
    this.#notify?.();
  }
}
