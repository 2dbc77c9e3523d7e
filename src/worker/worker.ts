/**
 * The TypeScript worker (issue 3): one StreamClaims stream with
 * `max_in_flight = concurrency`, a handler per lease, automatic heartbeats,
 * Complete/Fail from the handler's outcome, reconnects, and a bounded
 * shutdown. The protocol it follows is written up in
 * docs/writing-a-worker.md.
 *
 * The life of a lease here:
 *
 *     arrives on the stream ──> waiting ──(a slot frees)──> running ──> acknowledging ──> done
 *                                  │                          │  handler returns: Complete
 *                                  │                          │  handler throws:  Fail
 *                                  └── lost (server refusal or local expiry): the signal aborts,
 *                                      nothing is acknowledged, the handler's outcome is dropped
 *
 * A lease normally starts at once: the server never has more than
 * `concurrency` unfinished leases on the stream. It waits (heartbeated) only
 * when handlers the server no longer counts are still running: handlers of a
 * stream that broke before this one opened, and handlers whose lease was
 * lost but which have not returned yet. So at most `concurrency` handlers
 * ever run at once.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { setMaxListeners } from "node:events";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Job, Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { backoffDelay, pause, type BackoffOptions } from "./backoff.js";
import { createLeaseQueueClient, type LeaseQueueClient, type LeaseQueueTransport } from "./client.js";
import { LeaseLostError, PermanentJobError, RetryJobError, WorkerClosedError } from "./errors.js";
import { HeldLease, leaseLostReason } from "./held-lease.js";
import { jsonToValue, valueToJson } from "./json-values.js";

/** What a handler gets besides the job. */
export interface JobContext {
  /**
   * Aborted when the worker no longer owns the job: the lease was lost
   * (reason: LeaseLostError) or close() stopped waiting (reason:
   * WorkerClosedError). Pass it to fetch(), timers and child processes, and
   * stop side effects when it fires.
   */
  readonly signal: AbortSignal;
  /** The job's payload as plain JSON (`null` when none was submitted). */
  readonly payload: JsonValue;
  /** The lease token, e.g. as a fencing token for a downstream store. Never log it. */
  readonly leaseToken: string;
  /** When the lease runs out unless extended, as the server last reported it. */
  readonly leaseExpireTime: Date;
  /** This worker's id. */
  readonly workerId: string;
  /**
   * Extends the lease now. The SDK already heartbeats every
   * `heartbeatInterval`; call this after a step that may have stalled the
   * event loop. Rejects with LeaseLostError when the lease is gone, or with
   * the ConnectError of a call that failed otherwise (the timer keeps trying).
   */
  heartbeat(): Promise<void>;
}

/**
 * Runs one job. The value it returns (any JSON, at most 64 KiB; `undefined`
 * for none) becomes the job's result; a thrown error fails the attempt:
 * PermanentJobError dead-letters, RetryJobError sets the retry delay, any
 * other error retries with the job's backoff while attempts remain.
 */
export type JobHandler = (job: Job, ctx: JobContext) => Promise<JsonValue | void> | JsonValue | void;

/** What the worker reports through `onEvent`; for logs, metrics and tests. */
export type WorkerEvent =
  /** The stream is open and registered (its first message arrived). */
  | { type: "connected" }
  /** The stream broke; the worker reconnects after `retryInMs`. */
  | { type: "disconnected"; error: ConnectError; retryInMs: number }
  /** A lease arrived. */
  | { type: "lease"; job: Job }
  /** A heartbeat extended a lease; `job.leaseExpireTime` is the new expiry. */
  | { type: "heartbeat"; job: Job }
  /** Complete succeeded; `job` is the completed job. */
  | { type: "completed"; job: Job }
  /** Fail succeeded; `job` is in RETRY (eligible at `scheduleTime`) or DEAD. */
  | { type: "failed"; job: Job; error: string }
  /** close() gave back a lease whose job had not started; `job` is eligible again, attempt refunded. */
  | { type: "released"; job: Job }
  /** The lease was lost; the handler's signal has been aborted with `error`. */
  | { type: "lease-lost"; job: Job; error: LeaseLostError }
  /** Something went wrong that the worker worked around (a failed heartbeat, an acknowledgement that could not be sent). */
  | { type: "error"; error: Error; job?: Job }
  /** close() finished. */
  | { type: "closed" };

export interface WorkerOptions {
  /** The API URL; the worker creates its own client. Give this or `client`. */
  url?: string;
  /** A client from createLeaseQueueClient(), e.g. with TLS or interceptors. Give this or `url`. */
  client?: LeaseQueueClient;
  /** With `url`: the protocol; default `"grpc"` (see createLeaseQueueClient). */
  transport?: LeaseQueueTransport;
  /** The queue to work. */
  queue: string;
  /** Names this worker in leases and events: 1-128 of `[A-Za-z0-9._:@/-]`, e.g. `${hostname}:${pid}`. */
  workerId: string;
  /** Handlers running at once, and the stream's `max_in_flight`: 1..1000; default 1. */
  concurrency?: number;
  /** Lease duration in milliseconds, 1 000..43 200 000 (1 s..12 h); default 60 000. */
  leaseDuration?: number;
  /** Milliseconds between a lease's heartbeats; default a third of `leaseDuration`. Must be shorter than it. */
  heartbeatInterval?: number;
  /** Milliseconds close() waits for running handlers before failing their jobs back; default 10 000. */
  shutdownTimeout?: number;
  /** Reconnect backoff; default 250 ms doubling to 30 s, jittered. */
  reconnectBackoff?: BackoffOptions;
  handler: JobHandler;
  /** Observability hook; exceptions it throws are ignored. Without it, `error` and `disconnected` events go to the console. */
  onEvent?: (event: WorkerEvent) => void;
}

export interface Worker {
  readonly workerId: string;
  /** Handlers running now. */
  readonly running: number;
  /**
   * Stops taking work (ends the stream), waits up to `shutdownTimeout` for
   * running handlers and their Complete/Fail, then aborts the handlers still
   * running (WorkerClosedError) and fails their jobs with `retry_delay` 0 so
   * another worker picks them up at once. Leases that arrived but had not
   * started are given back at once with Release (attempt refunded, eligible
   * again). Resolves when done (at
   * most about `shutdownTimeout` + 5 s); calling it again returns the same
   * promise.
   */
  close(): Promise<void>;
}

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
const WORKER_ID = /^[A-Za-z0-9._:@/-]{1,128}$/;
const MAX_ERROR_CHARS = 4096;
const MAX_RETRY_DELAY_MS = 30 * 24 * 3600 * 1000;
/** After shutdownTimeout, how long close() gives the last Complete/Fail calls. */
const FINAL_ACK_GRACE_MS = 5000;
/** Per-call deadline of Complete and Fail. */
const ACK_TIMEOUT_MS = 10_000;
/**
 * Failures of Complete/Fail/Release worth retrying while the lease lasts.
 * `canceled` is among them: connect-node reports a connection reset under
 * an HTTP/2 call as "stream closed with error code CANCEL", and giving up
 * there would leave a finished job to expire. The SDK's own cancellation
 * (close() past its grace) is told apart by the cutoff signal.
 */
const TRANSIENT: ReadonlySet<Code> = new Set([
  Code.Canceled,
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Internal,
  Code.Unknown,
]);

const RPC_OF = { complete: "Complete", release: "Release", fail: "Fail" } as const;

type Outcome =
  | { kind: "complete"; result: JsonValue | undefined }
  /** Give an unstarted lease back (Release): the attempt is refunded. */
  | { kind: "release" }
  | { kind: "fail"; error: string; permanent: boolean; retryDelayMs: number | undefined };

/** A lease plus the worker's bookkeeping for it. */
interface Slot {
  readonly lease: HeldLease;
  handlerRunning: boolean;
  /** close() stopped waiting and failed the job; the handler's outcome is dropped. */
  abandoned: boolean;
}

/**
 * Starts a worker on `queue`: it connects at once and keeps working until
 * close(). See WorkerOptions for defaults.
 */
export function createWorker(options: WorkerOptions): Worker {
  return new StreamWorker(options);
}

class StreamWorker implements Worker {
  readonly workerId: string;
  readonly #client: LeaseQueueClient;
  readonly #queue: string;
  readonly #concurrency: number;
  readonly #leaseDurationMs: number;
  readonly #heartbeatIntervalMs: number;
  readonly #shutdownTimeoutMs: number;
  readonly #backoff: BackoffOptions;
  readonly #handler: JobHandler;
  readonly #onEvent: (event: WorkerEvent) => void;

  /** Aborted by close(): ends the stream and the reconnect wait. */
  readonly #closing = new AbortController();
  /** Aborted late in close(): cuts off Complete/Fail calls still retrying. */
  readonly #ackCutoff = new AbortController();
  readonly #slots = new Set<Slot>();
  readonly #waiting: Slot[] = [];
  readonly #acks = new Set<Promise<void>>();
  #running = 0;
  #idleWaiters: Array<() => void> = [];
  readonly #loop: Promise<void>;
  #closed: Promise<void> | undefined;

  constructor(o: WorkerOptions) {
    if ((o.url === undefined) === (o.client === undefined)) throw new TypeError("createWorker: give exactly one of `url` and `client`");
    if (!QUEUE_NAME.test(o.queue)) throw new TypeError(`createWorker: queue ${JSON.stringify(o.queue)} must match ${QUEUE_NAME.source}`);
    if (!WORKER_ID.test(o.workerId)) throw new TypeError(`createWorker: workerId must be 1-128 chars of [A-Za-z0-9._:@/-]`);
    if (typeof o.handler !== "function") throw new TypeError("createWorker: handler must be a function");
    const concurrency = o.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) throw new RangeError("createWorker: concurrency must be an integer in 1..1000");
    const leaseDurationMs = o.leaseDuration ?? 60_000;
    if (!Number.isInteger(leaseDurationMs) || leaseDurationMs < 1000 || leaseDurationMs > 43_200_000) {
      throw new RangeError("createWorker: leaseDuration is in milliseconds and must be an integer in 1000..43200000 (1 s..12 h)");
    }
    const heartbeatIntervalMs = o.heartbeatInterval ?? Math.floor(leaseDurationMs / 3);
    if (!(heartbeatIntervalMs > 0 && heartbeatIntervalMs < leaseDurationMs)) throw new RangeError("createWorker: heartbeatInterval must be > 0 and shorter than leaseDuration");
    const shutdownTimeoutMs = o.shutdownTimeout ?? 10_000;
    if (!(shutdownTimeoutMs >= 0)) throw new RangeError("createWorker: shutdownTimeout must be >= 0");

    this.workerId = o.workerId;
    this.#client = o.client ?? createLeaseQueueClient({ url: o.url!, transport: o.transport });
    this.#queue = o.queue;
    this.#concurrency = concurrency;
    this.#leaseDurationMs = leaseDurationMs;
    this.#heartbeatIntervalMs = heartbeatIntervalMs;
    this.#shutdownTimeoutMs = shutdownTimeoutMs;
    this.#backoff = o.reconnectBackoff ?? {};
    this.#handler = o.handler;
    const onEvent = o.onEvent;
    this.#onEvent = (event) => {
      if (onEvent === undefined) {
        if (event.type === "error") console.error(`leasequeue worker ${this.workerId}: ${event.error.message}`);
        if (event.type === "disconnected") {
          console.warn(`leasequeue worker ${this.workerId}: stream broke (${event.error.message}); reconnecting in ${event.retryInMs} ms`);
        }
        return;
      }
      try {
        onEvent(event);
      } catch {
        // An observer's bug must not stop the worker.
      }
    };
    // Every Complete/Fail in flight listens on the cutoff signal: up to
    // `concurrency` at once is expected, not a leak.
    setMaxListeners(0, this.#ackCutoff.signal);
    this.#loop = this.#streamLoop();
  }

  get running(): number {
    return this.#running;
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  /** Keeps one StreamClaims stream open until close(), reconnecting with jittered backoff. */
  async #streamLoop(): Promise<void> {
    const signal = this.#closing.signal;
    let failures = 0;
    while (!signal.aborted) {
      let error: ConnectError;
      try {
        const stream = this.#client.streamClaims(
          {
            queue: this.#queue,
            workerId: this.workerId,
            leaseDuration: durationFromMs(this.#leaseDurationMs),
            maxInFlight: this.#concurrency,
          },
          { signal },
        );
        let connected = false;
        for await (const message of stream) {
          if (!connected) {
            connected = true;
            failures = 0;
            this.#onEvent({ type: "connected" });
          }
          if (message.lease !== undefined) this.#accept(message.lease);
        }
        error = new ConnectError("the server ended the stream", Code.Unavailable);
      } catch (e) {
        error = ConnectError.from(e);
      }
      if (signal.aborted) break;
      const retryInMs = backoffDelay(failures++, this.#backoff);
      this.#onEvent({ type: "disconnected", error, retryInMs });
      await pause(retryInMs, signal);
    }
  }

  #accept(lease: Lease): void {
    if (lease.job === undefined) {
      this.#onEvent({ type: "error", error: new Error("the server sent a lease without a job; ignored") });
      return;
    }
    const job = lease.job;
    const held = new HeldLease(lease, {
      client: this.#client,
      leaseDurationMs: this.#leaseDurationMs,
      heartbeatIntervalMs: this.#heartbeatIntervalMs,
      onHeartbeat: (updated) => this.#onEvent({ type: "heartbeat", job: updated }),
      onHeartbeatError: (error) => this.#onEvent({ type: "error", error, job }),
      onLost: (error) => this.#onEvent({ type: "lease-lost", job, error }),
    });
    const slot: Slot = { lease: held, handlerRunning: false, abandoned: false };
    this.#slots.add(slot);
    this.#onEvent({ type: "lease", job });
    this.#waiting.push(slot);
    this.#startWaiting();
  }

  #startWaiting(): void {
    while (this.#running < this.#concurrency && this.#waiting.length > 0) {
      const slot = this.#waiting.shift()!;
      if (!slot.lease.held) {
        this.#slots.delete(slot); // lost while waiting; already reported
        continue;
      }
      void this.#run(slot);
    }
    this.#checkIdle();
  }

  async #run(slot: Slot): Promise<void> {
    const held = slot.lease;
    const workerId = this.workerId;
    const ctx: JobContext = {
      signal: held.signal,
      payload: valueToJson(held.job.payload),
      leaseToken: held.token,
      get leaseExpireTime() {
        return held.leaseExpireTime;
      },
      workerId,
      heartbeat: () => held.heartbeat(),
    };
    this.#running++;
    slot.handlerRunning = true;
    let outcome: Outcome;
    try {
      outcome = { kind: "complete", result: asJsonResult(await this.#handler(held.job, ctx)) };
    } catch (err) {
      outcome = failureOf(err);
    }
    slot.handlerRunning = false;
    this.#running--;
    if (slot.abandoned || !held.held) {
      // close() already failed the job, or the lease is gone: nothing to report.
      if (!slot.abandoned) this.#slots.delete(slot);
    } else {
      this.#acknowledge(slot, outcome);
    }
    this.#startWaiting();
  }

  /** Sends Complete or Fail (tracked, so close() can wait for it). */
  #acknowledge(slot: Slot, outcome: Outcome): void {
    const ack = this.#sendAcknowledgement(slot.lease, outcome).finally(() => {
      this.#acks.delete(ack);
      this.#slots.delete(slot);
      this.#checkIdle();
    });
    this.#acks.add(ack);
  }

  /**
   * Retries passing failures (unavailable, deadline) while the lease lasts;
   * a refused lease is lost; a result the server refuses (too large) fails
   * the job instead, so it is not left to expire.
   */
  async #sendAcknowledgement(held: HeldLease, outcome: Outcome): Promise<void> {
    held.beginAcknowledgement();
    const { id: jobId } = held.job;
    const callOptions = { signal: this.#ackCutoff.signal, timeoutMs: ACK_TIMEOUT_MS };
    for (let attempt = 0; ; attempt++) {
      try {
        if (outcome.kind === "complete") {
          const res = await this.#client.complete(
            { jobId, leaseToken: held.token, result: outcome.result === undefined ? undefined : jsonToValue(outcome.result) },
            callOptions,
          );
          held.release();
          this.#onEvent({ type: "completed", job: res.job ?? held.job });
        } else if (outcome.kind === "release") {
          const res = await this.#client.release({ jobId, leaseToken: held.token }, callOptions);
          held.release();
          this.#onEvent({ type: "released", job: res.job ?? held.job });
        } else {
          const res = await this.#client.fail(
            {
              jobId,
              leaseToken: held.token,
              error: outcome.error,
              permanent: outcome.permanent,
              retryDelay: outcome.retryDelayMs === undefined ? undefined : durationFromMs(outcome.retryDelayMs),
            },
            callOptions,
          );
          held.release();
          this.#onEvent({ type: "failed", job: res.job ?? held.job, error: outcome.error });
        }
        return;
      } catch (e) {
        const err = ConnectError.from(e);
        const lost = leaseLostReason(err);
        if (lost !== undefined) {
          held.markLost(lost, `the server refused ${RPC_OF[outcome.kind]}: ${err.rawMessage}`);
          return;
        }
        if (outcome.kind === "complete" && err.code === Code.InvalidArgument) {
          this.#onEvent({ type: "error", error: err, job: held.job });
          outcome = { kind: "fail", error: truncate(`the server refused the result: ${err.rawMessage}`), permanent: false, retryDelayMs: undefined };
          continue;
        }
        if (!TRANSIENT.has(err.code) || this.#ackCutoff.signal.aborted) {
          held.release();
          this.#onEvent({ type: "error", error: err, job: held.job });
          return;
        }
        if (held.expiredLocally) {
          held.markLost("EXPIRED_LOCALLY", `could not ${outcome.kind} the job before the lease ran out: ${err.rawMessage}`);
          return;
        }
        this.#onEvent({ type: "error", error: err, job: held.job });
        await pause(Math.min(2000, 100 * 2 ** attempt), this.#ackCutoff.signal);
      }
    }
  }

  async #shutdown(): Promise<void> {
    this.#closing.abort();
    await this.#loop; // no lease arrives after this
    for (const slot of this.#waiting.splice(0)) {
      if (!slot.lease.held) {
        this.#slots.delete(slot);
        continue;
      }
      this.#acknowledge(slot, { kind: "release" });
    }
    const drained = await within(this.#idle(), this.#shutdownTimeoutMs);
    if (!drained) {
      for (const slot of this.#slots) {
        if (!slot.handlerRunning || slot.abandoned) continue;
        if (!slot.lease.held) continue; // lost: not ours to fail
        slot.abandoned = true;
        const reason = new WorkerClosedError(slot.lease.job.id, this.#shutdownTimeoutMs);
        slot.lease.abortHandler(reason);
        this.#acknowledge(slot, { kind: "fail", error: reason.message, permanent: false, retryDelayMs: 0 });
      }
      const acks = Promise.all(this.#acks);
      const sent = await within(acks, FINAL_ACK_GRACE_MS);
      if (!sent) this.#ackCutoff.abort();
      await acks;
    }
    for (const slot of this.#slots) slot.lease.release();
    this.#slots.clear();
    this.#onEvent({ type: "closed" });
  }

  /** Resolves when no handler runs and no Complete/Fail is pending. */
  #idle(): Promise<void> {
    return new Promise((resolve) => {
      this.#idleWaiters.push(resolve);
      this.#checkIdle();
    });
  }

  #checkIdle(): void {
    if (this.#running > 0 || this.#acks.size > 0 || this.#waiting.length > 0) return;
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
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

/** The handler's return value as JSON (via JSON.stringify, so Dates and toJSON() behave as usual). */
function asJsonResult(value: JsonValue | void): JsonValue | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
}

function failureOf(err: unknown): Outcome {
  const error = truncate(describe(err));
  if (err instanceof PermanentJobError) return { kind: "fail", error, permanent: true, retryDelayMs: undefined };
  if (err instanceof RetryJobError) {
    return { kind: "fail", error, permanent: false, retryDelayMs: Math.round(Math.min(err.retryDelayMs, MAX_RETRY_DELAY_MS)) };
  }
  return { kind: "fail", error, permanent: false, retryDelayMs: undefined };
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message === "" ? err.name : err.message;
  return typeof err === "string" ? err : `non-error thrown: ${String(err)}`;
}

function truncate(text: string): string {
  return text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS - 1)}…`;
}
