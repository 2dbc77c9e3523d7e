/**
 * Schedules (docs/api.md "Schedules"), the running half: one timer per
 * server, set to the earliest next run of any schedule, fires the due runs
 * through the store (Store.fireDueSchedules: one transaction per batch, a run
 * once however many servers fire it) and sets itself again.
 */
import type { Clock } from "../domain/clock.js";
import type { ProducerSpans } from "../domain/producer-spans.js";
import type { Logger } from "../logger.js";
import type { FiredRun, Store } from "../store/store.js";

export interface SchedulerOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Most schedules fired by one transaction; a full batch is followed by another. Default 100. */
  batchSize?: number;
  /** Longest sleep between two looks at the schedules (for changes made through other servers). Default 60 s. */
  rescanMs?: number;
  /** Wait after a firing that failed (the database busy or failing) before the next try. Default 1 s. */
  retryMs?: number;
  /** Told about every batch of runs fired (metrics, tests). */
  onFired?: (runs: FiredRun[]) => void;
  /** Told each time the timer is set, with the time (by the clock) it is set for. */
  onArmed?: (at: number) => void;
  /**
   * When the server traces (docs/operations.md "Tracing"): each run's job
   * starts a new trace, whose root is the run's PRODUCER span. Undefined:
   * runs carry no trace context.
   */
  producerSpans?: ProducerSpans;
}

/**
 * Nothing polls at a short interval: the timer is set again
 * - after each firing, to the next run the store then holds;
 * - when this server creates, replaces or deletes a schedule (rearm());
 * - when another server's run is announced (a SCHEDULED event it
 *   committed): that server moved a next run, so ours may be early or late;
 * - when another server creates, replaces or deletes a schedule (announced
 *   as CommittedChange.schedulesChanged: a NOTIFY on PostgreSQL, the
 *   schedules table's signature for another connection to a SQLite file).
 * As a last resort against a change that no announcement reached, the
 * timer never sleeps longer than `rescanMs`.
 *
 * Schedules live in the database, so they survive restarts: a server that
 * starts reads the next run at once, and a run it missed while down is
 * fired then (only the latest one, see domain/schedule.ts).
 */
export class Scheduler {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #batchSize: number;
  readonly #rescanMs: number;
  readonly #retryMs: number;
  readonly #onFired: ((runs: FiredRun[]) => void) | undefined;
  readonly #onArmed: ((at: number) => void) | undefined;
  readonly #producerSpans: ProducerSpans | undefined;
  readonly #unsubscribe: () => void;
  #timer: NodeJS.Timeout | undefined;
  /** The firing or re-arming in progress; a rearm() meanwhile runs once it ends. */
  #busy: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #armedFor: number | undefined;

  constructor(options: SchedulerOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#batchSize = options.batchSize ?? 100;
    this.#rescanMs = options.rescanMs ?? 60_000;
    this.#retryMs = options.retryMs ?? 1000;
    this.#onFired = options.onFired;
    this.#onArmed = options.onArmed;
    this.#producerSpans = options.producerSpans;
    this.#unsubscribe = this.#store.onCommitted(({ events, external, schedulesChanged }) => {
      if (external && (schedulesChanged === true || events.some((e) => e.kind === "scheduled"))) this.rearm();
    });
    this.rearm();
  }

  /**
   * When the timer fires next (epoch ms by the clock): the earliest next run,
   * or the rescan when that is further away; undefined while stopped or busy.
   */
  get armedFor(): number | undefined {
    return this.#armedFor;
  }

  /** Reads the next run again and sets the timer to it (after the firing in progress, if any). */
  rearm(): void {
    if (this.#stopped) return;
    if (this.#busy !== undefined) {
      this.#again = true;
      return;
    }
    this.#run(() => this.#arm());
  }

  /** Stops the timer and waits for a firing in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe();
    this.#clearTimer();
    await this.#busy;
  }

  #run(work: () => Promise<void>): void {
    this.#clearTimer();
    this.#busy = work().finally(() => {
      this.#busy = undefined;
      if (this.#again) {
        this.#again = false;
        this.rearm();
      }
    });
  }

  async #arm(): Promise<void> {
    let next: number | null;
    try {
      next = await this.#store.nextScheduleRunTime();
    } catch (err) {
      this.#log.warn("reading the schedules failed; will retry", { error: err });
      this.#setTimer(this.#retryMs);
      return;
    }
    const now = this.#clock.now();
    this.#setTimer(next === null ? this.#rescanMs : Math.min(this.#rescanMs, Math.max(0, next - now)));
  }

  async #fire(): Promise<void> {
    try {
      for (;;) {
        const runs = await this.#store.fireDueSchedules(this.#batchSize, this.#producerSpans !== undefined);
        if (runs.length > 0) this.#fired(runs);
        if (runs.length < this.#batchSize || this.#stopped) break;
        // Let the writers queued meanwhile commit before the next batch.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.#log.warn("firing schedules failed; will retry", { error: err });
      this.#setTimer(this.#retryMs);
      return;
    }
    await this.#arm();
  }

  #fired(runs: FiredRun[]): void {
    for (const run of runs) {
      if (!run.submitted) continue;
      const { job } = run;
      if (this.#producerSpans !== undefined && job.traceContext !== null) {
        this.#producerSpans.recordRoot(job.queue, job.traceContext, job.id, job.createTime);
      }
      this.#log.debug("schedule run submitted", {
        schedule: run.schedule,
        runTime: new Date(run.runTime).toISOString(),
        jobId: job.id,
      });
    }
    try {
      this.#onFired?.(runs);
    } catch {
      // An observer's failure must not stop the schedules.
    }
  }

  #setTimer(delayMs: number): void {
    if (this.#stopped) return;
    this.#clearTimer();
    this.#armedFor = this.#clock.now() + delayMs;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#armedFor = undefined;
      if (this.#busy !== undefined) this.#again = true;
      else this.#run(() => this.#fire());
    }, delayMs);
    this.#timer.unref();
    this.#onArmed?.(this.#armedFor);
  }

  #clearTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#armedFor = undefined;
  }
}

/** Starts the scheduler of a server (app.ts): the timer is set at once, so runs missed while it was down fire now. */
export function startScheduler(options: SchedulerOptions): Scheduler {
  return new Scheduler(options);
}
