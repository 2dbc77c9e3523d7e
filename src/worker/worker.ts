/**
 * The TypeScript worker: leases in, a handler per lease, automatic
 * heartbeats, Complete/Fail from the handler's outcome, reconnects, and a
 * bounded shutdown, on the fastest path its transport allows
 * (docs/writing-a-worker.md "The path it takes"; acknowledgements batched
 * by ack-batcher.ts). This file composes the worker from its parts (a file
 * per concern, ARCHITECTURE.md) and runs its leases' lives (held-lease.ts)
 * and its shutdown. A lease waits, heartbeated, only while handlers the
 * server no longer counts still run (of a stream that broke, or of a lease
 * that was lost), so at most `concurrency` handlers ever run at once.
 */
import { setMaxListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ACK_ANSWER_TIMEOUT_MS, AckBatcher } from "./ack-batcher.js";
import { resultRefused, type Outcome } from "./attempt-outcome.js";
import { startAttemptSpan } from "./attempt-span.js";
import { pause } from "./backoff.js";
import { WorkerClosedError } from "./errors.js";
import { HeldLease } from "./held-lease.js";
import { runAttempt } from "./job-attempt.js";
import { keepConnected, type LeaseTransport } from "./lease-transport.js";
import { OutcomeAcknowledger } from "./outcome-acknowledger.js";
import { resultRefusal } from "./result-checks.js";
import { ClaimTransport } from "./claim-transport.js";
import { StreamClaimsTransport } from "./stream-claims-transport.js";
import type { ReportEvent } from "./worker-events.js";
import { workerSettings, type WorkerOptions, type WorkerSettings } from "./worker-options.js";
import { WorkStreamTransport } from "./work-stream-transport.js";

export interface Worker {
  readonly workerId: string;
  /** Handlers running now. */
  readonly running: number;
  /**
   * Stops taking work (half-closes the Work stream, whose last
   * acknowledgements are still answered on it; or cancels StreamClaims),
   * waits up to `shutdownTimeout` for running handlers and their
   * Complete/Fail, then aborts the handlers still running
   * (WorkerClosedError) and fails their jobs with `retry_delay` 0 so
   * another worker picks them up at once. Leases that arrived but had not
   * started are given back at once with Release (attempt refunded, eligible
   * again). Resolves when done (at most about `shutdownTimeout` + 5 s);
   * calling it again returns the same promise. It never rejects: after
   * the worker stopped on a refusal, it resolves once that stop is done.
   */
  close(): Promise<void>;
  /**
   * Settles once the worker has stopped, after its `closed` event: resolves
   * when close() stopped it; rejects with the server's ConnectError when
   * the server refused the worker in a way no retry can cure
   * (`invalid_argument`, `unauthenticated`, `permission_denied`,
   * `unimplemented`: a bad token, a queue the token may not use, a request
   * the server does not accept), reported first as a `fatal` `error`
   * event. Other failures (`unavailable`, a dropped connection, ...) never
   * settle it: the worker reconnects. A rejection nobody awaits is not an
   * unhandled rejection.
   */
  readonly closed: Promise<void>;
}

/** After shutdownTimeout, how long close() gives the last Complete/Fail. */
const FINAL_ACK_GRACE_MS = 5000;

/**
 * Starts a worker on `queue`: it connects at once and keeps working until
 * close(), or until the server refuses it for good (`worker.closed`). See
 * WorkerOptions for defaults. Throws a TypeError or RangeError naming the
 * option for options it cannot use (a required one missing, one of the
 * wrong type or out of range), before anything connects.
 */
export function createWorker(options: WorkerOptions): Worker {
  return new LeaseWorker(options);
}

class LeaseWorker implements Worker {
  readonly workerId: string;
  readonly #settings: WorkerSettings;
  readonly #concurrency: number;
  readonly #shutdownTimeoutMs: number;
  readonly #onEvent: ReportEvent;
  readonly #acks: AckBatcher;
  readonly #acknowledger: OutcomeAcknowledger;
  readonly #transport: LeaseTransport;

  /** Aborted by close(): ends the stream and the reconnect wait. */
  readonly #closing = new AbortController();
  /** Aborted late in close(): cuts off acknowledgements still being sent. */
  readonly #ackCutoff = new AbortController();
  /** Every lease not yet in a terminal state. */
  readonly #leases = new Set<HeldLease>();
  /** Leases in state "waiting", in arrival order. */
  readonly #waiting: HeldLease[] = [];
  /** Leases whose handler has not returned yet (whatever their state). */
  readonly #handlers = new Set<HeldLease>();
  /** Each returns true once satisfied. */
  #idleWaiters: Array<() => boolean> = [];
  readonly #loop: Promise<ConnectError | undefined>;
  #closed: Promise<void> | undefined;
  /** The refusal the worker stopped on, if it did. */
  #refusal: ConnectError | undefined;
  readonly closed: Promise<void>;
  #settleClosed!: (refusal: ConnectError | undefined) => void;

  constructor(options: WorkerOptions) {
    const settings = workerSettings(options);
    this.#settings = settings;
    this.workerId = settings.workerId;
    this.#concurrency = settings.concurrency;
    this.#shutdownTimeoutMs = settings.shutdownTimeoutMs;
    this.#onEvent = settings.onEvent;
    // Every Acknowledge call and retry pause listens on the cutoff signal.
    setMaxListeners(0, this.#ackCutoff.signal);
    this.#acks = new AckBatcher({
      client: settings.client,
      windowMs: settings.ackBatchWindowMs,
      callTimeoutMs: ACK_ANSWER_TIMEOUT_MS,
      cutoff: this.#ackCutoff.signal,
    });
    this.#acknowledger = new OutcomeAcknowledger({
      acks: this.#acks,
      client: settings.client,
      cutoff: this.#ackCutoff.signal,
      onEvent: this.#onEvent,
    });
    const transportOptions = {
      client: settings.client,
      queue: settings.queue,
      workerId: settings.workerId,
      leaseDurationMs: settings.leaseDurationMs,
      maxInFlight: settings.concurrency,
      closing: this.#closing.signal,
      accept: (lease: Lease) => this.#accept(lease),
      cancelled: (jobId: string) => this.#cancelled(jobId),
    };
    this.#transport =
      settings.path === "work"
        ? new WorkStreamTransport({ ...transportOptions, acks: this.#acks })
        : settings.path === "unary"
          ? new ClaimTransport({ ...transportOptions, acks: this.#acks, room: () => this.#room() })
          : new StreamClaimsTransport(transportOptions);
    this.closed = new Promise<void>((resolve, reject) => {
      this.#settleClosed = (refusal) => (refusal === undefined ? resolve() : reject(refusal));
    });
    // Handled: a worker nobody awaits still stops quietly (its `error` event says why).
    this.closed.catch(() => undefined);
    this.#loop = keepConnected(this.#transport, {
      closing: this.#closing.signal,
      backoff: settings.reconnectBackoff,
      onEvent: this.#onEvent,
    });
    void this.#loop.then((refusal) => {
      if (refusal === undefined) return;
      this.#refusal = refusal;
      this.#onEvent({ type: "error", error: refusal, fatal: true });
      void this.close();
    });
  }

  get running(): number {
    return this.#handlers.size;
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  #accept(lease: Lease): void {
    if (lease.job === undefined) {
      this.#onEvent({ type: "error", error: new Error("the server sent a lease without a job; ignored") });
      return;
    }
    const job = lease.job;
    const held: HeldLease = new HeldLease(lease, {
      acks: this.#acks,
      leaseDurationMs: this.#settings.leaseDurationMs,
      heartbeatIntervalMs: this.#settings.heartbeatIntervalMs,
      onHeartbeat: (updated) => this.#onEvent({ type: "heartbeat", job: updated }),
      onHeartbeatError: (error) => this.#onEvent({ type: "error", error, job }),
      onLost: (error) => this.#onEvent({ type: "lease-lost", job, error }),
      onDone: () => {
        this.#leases.delete(held);
        this.#checkIdle();
      },
    });
    this.#leases.add(held);
    this.#onEvent({ type: "lease", job });
    this.#waiting.push(held);
    this.#startWaiting();
  }

  /** The server cancelled a job this worker holds: its handler is aborted and nothing is acknowledged for it. */
  #cancelled(jobId: string): void {
    for (const held of this.#leases) {
      if (held.job.id !== jobId) continue;
      if (held.markCancelled()) this.#onEvent({ type: "cancelled", job: held.job });
      this.#startWaiting();
      return;
    }
  }

  /** Starts waiting leases while slots are free; none once close() began (they are released). */
  #startWaiting(): void {
    while (this.#handlers.size < this.#concurrency && this.#waiting.length > 0 && !this.#closing.signal.aborted) {
      const lease = this.#waiting.shift()!;
      if (lease.state !== "waiting") continue; // lost while waiting; already reported
      void this.#run(lease);
    }
    this.#transport.roomChanged?.();
    this.#checkIdle();
  }

  /** Leases the worker could start now: slots with no handler and no lease waiting for them. */
  #room(): number {
    let waiting = 0;
    for (const lease of this.#waiting) if (lease.state === "waiting") waiting++;
    return Math.max(0, this.#concurrency - this.#handlers.size - waiting);
  }

  async #run(lease: HeldLease): Promise<void> {
    const span = startAttemptSpan(lease.job, this.workerId, this.#settings.tracing, (error) =>
      this.#onEvent({ type: "error", error, job: lease.job }),
    );
    let outcome: Outcome = await span.within(() =>
      runAttempt(lease, this.#settings.handler, this.workerId, () => {
        lease.start();
        this.#handlers.add(lease);
      }),
    );
    this.#handlers.delete(lease);
    // Lost, or close() already failed the job: the outcome is dropped.
    if (lease.state === "running") {
      const refused = outcome.kind === "complete" ? resultRefusal(outcome.result) : undefined;
      if (refused !== undefined) {
        this.#onEvent({ type: "error", error: refused, job: lease.job });
        outcome = resultRefused("worker", refused);
      }
      this.#finish(lease, outcome);
    }
    span.end(outcome);
    this.#startWaiting();
  }

  #finish(lease: HeldLease, outcome: Outcome): void {
    lease.flushProgress();
    lease.finish();
    void this.#acknowledger.acknowledge(lease, outcome);
  }

  async #shutdown(): Promise<void> {
    this.#closing.abort(); // half-closes Work (or cancels StreamClaims); no handler starts after this
    const ended = await within(this.#loop, this.#shutdownTimeoutMs + FINAL_ACK_GRACE_MS);
    if (!ended) {
      this.#transport.abandon(new ConnectError("the server did not end the Work stream after close()", Code.DeadlineExceeded));
      await this.#loop;
    }
    // No lease arrives after this. Those that never started go back, attempt refunded.
    for (const lease of this.#waiting.splice(0)) {
      if (lease.state === "waiting") this.#finish(lease, { kind: "release" });
    }
    const drained = await within(this.#idle(), this.#shutdownTimeoutMs);
    if (!drained) {
      for (const lease of this.#handlers) {
        if (lease.state !== "running") continue; // lost: not ours to fail; finishing: already on its way
        const reason = new WorkerClosedError(lease.job.id, this.#shutdownTimeoutMs);
        lease.abortHandler(reason);
        this.#finish(lease, { kind: "fail", error: reason.message, permanent: false, retryDelayMs: 0 });
      }
      const finishing = this.#noneFinishing();
      const sent = await within(finishing, FINAL_ACK_GRACE_MS);
      if (!sent) this.#ackCutoff.abort();
      await finishing;
    }
    for (const lease of [...this.#leases]) lease.settle("dropped");
    this.#onEvent({ type: "closed" });
    this.#settleClosed(this.#refusal);
  }

  /** Resolves when no handler runs, no lease waits and no acknowledgement is on its way. */
  #idle(): Promise<void> {
    return this.#whenIdle(() => this.#handlers.size === 0 && this.#waiting.length === 0 && !this.#anyFinishing());
  }

  /** Resolves when no Complete/Fail/Release is on its way. */
  #noneFinishing(): Promise<void> {
    return this.#whenIdle(() => !this.#anyFinishing());
  }

  #anyFinishing(): boolean {
    for (const lease of this.#leases) if (lease.state === "finishing") return true;
    return false;
  }

  #whenIdle(done: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (!done()) return false;
        resolve();
        return true;
      };
      if (!check()) this.#idleWaiters.push(check);
    });
  }

  #checkIdle(): void {
    if (this.#idleWaiters.length === 0) return;
    this.#idleWaiters = this.#idleWaiters.filter((check) => !check());
  }
}

/** True if `promise` settles within `ms`; the timer does not outlive the answer. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  try {
    return await Promise.race([promise.then(() => true), pause(ms, timer.signal).then(() => false)]);
  } finally {
    timer.abort();
  }
}
