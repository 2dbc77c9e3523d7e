/**
 * Producers waiting for jobs to end (WaitJob, docs/api.md "Workflows"): a
 * waiter is woken by the committed event that takes its job to COMPLETED,
 * DEAD or CANCELLED, whichever server committed it (the store announces
 * other servers' commits too), with no polling while it waits. A waiter is
 * registered before its caller reads the job, so an end that commits
 * between the read and the wait is never missed. Announcements carry ids
 * only; the caller reads the job itself from the store.
 */
import { hasEnded } from "../domain/job.js";
import { timerDelay } from "../domain/timing-defaults.js";
import type { Store } from "../store/store.js";

/** One registered wait. */
export interface JobWait {
  /** Resolves true once an event ending the job has committed; false at the timeout, when the signal aborts, when cancelled, or when the waiters close. */
  readonly ended: Promise<boolean>;
  /** Stops waiting (resolves `ended` with false if it has not resolved yet). */
  cancel(): void;
}

export class JobWaiters {
  readonly #waiters = new Map<string, Set<(ended: boolean) => void>>();
  readonly #unsubscribe: () => void;

  constructor(store: Store) {
    this.#unsubscribe = store.onCommitted(({ events }) => {
      if (this.#waiters.size === 0) return;
      for (const e of events) {
        if (!hasEnded(e.toState)) continue;
        const waiters = this.#waiters.get(e.jobId);
        if (waiters !== undefined) for (const done of [...waiters]) done(true);
      }
    });
  }

  /**
   * Registers a wait for the job's end, for at most `timeoutMs` or until
   * `signal` aborts; call it before reading the job.
   */
  register(jobId: string, timeoutMs: number, signal: AbortSignal): JobWait {
    let waiters = this.#waiters.get(jobId);
    if (waiters === undefined) {
      waiters = new Set();
      this.#waiters.set(jobId, waiters);
    }
    const set = waiters;
    let done!: (ended: boolean) => void;
    const ended = new Promise<boolean>((resolve) => {
      done = (result) => {
        if (!set.delete(done)) return;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        if (set.size === 0 && this.#waiters.get(jobId) === set) this.#waiters.delete(jobId);
        resolve(result);
      };
    });
    const onAbort = () => done(false);
    const timer = setTimeout(onAbort, timerDelay(timeoutMs));
    set.add(done);
    if (signal.aborted) done(false);
    else signal.addEventListener("abort", onAbort, { once: true });
    return { ended, cancel: onAbort };
  }

  /** Waits registered now, over all jobs. */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /** Ends every wait (each resolves false) and stops listening. */
  close(): void {
    this.#unsubscribe();
    for (const set of [...this.#waiters.values()]) for (const done of [...set]) done(false);
  }
}
