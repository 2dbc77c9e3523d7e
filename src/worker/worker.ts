/**
 * The TypeScript worker: leases in, a handler per lease, automatic
 * heartbeats, Complete/Fail from the handler's outcome, reconnects, and a
 * bounded shutdown. The protocol it follows is written up in
 * docs/writing-a-worker.md.
 *
 * It takes the fastest path its transport allows (api.md section A):
 *
 * - over HTTP/2 (gRPC, Connect with httpVersion "2"): one Work stream with
 *   `max_in_flight = concurrency`; leases come down on it in batches, and
 *   every acknowledgement goes up on it;
 * - over HTTP/1.1 (Connect), which cannot carry a bidirectional stream:
 *   StreamClaims for leases, and Acknowledge calls for acknowledgements.
 *
 * Either way acknowledgements are batched (ack-batcher.ts): the Completes
 * and Fails of handlers that finish together and the heartbeats of every
 * lease held share messages. While the Work stream is down they go by
 * Acknowledge, so held leases stay heartbeated through a reconnect.
 *
 * The life of a lease is the state machine in held-lease.ts. A lease
 * normally starts at once: the server never has more than `concurrency`
 * unfinished leases on the stream, and a lease counts there until its
 * acknowledgement is applied. It waits (heartbeated) only when handlers the
 * server no longer counts are still running: handlers of a stream that
 * broke before this one opened, and handlers whose lease was lost but which
 * have not returned yet. So at most `concurrency` handlers ever run at once.
 */
import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import { setMaxListeners } from "node:events";
import { durationFromMs, timestampFromMs, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { jsonDepth, nestedTooDeepText } from "../domain/json-depth.js";
import { BOUNDS, DEFAULTS } from "../domain/request-bounds.js";
import { AcknowledgementSchema, JobState, WorkStartSchema, type Job, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { AckBatcher } from "./ack-batcher.js";
import { backoffDelay, pause, type BackoffOptions } from "./backoff.js";
import { canStreamBothWays, createLeaseQueueClient, type LeaseQueueClient, type LeaseQueueTransport } from "./client.js";
import { LeaseLostError, PermanentJobError, RetryJobError, SnoozeJob, WorkerClosedError } from "./errors.js";
import { HeldLease, leaseLostReason } from "./held-lease.js";
import { jsonToValue, valueToJson } from "./json-values.js";
import { isAuthRefusal, refusalAdvice } from "./refusal.js";
import { WorkStreamSide } from "./work-stream.js";

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
  /**
   * Reports the job's progress (any JSON value, at most 4 KiB as compact
   * JSON and 32 levels deep): stored as the job's `progress`, shown by
   * GetJob and the console (api.md section D). It goes with the next
   * heartbeat, brought forward to at most a second from now; reports made
   * in between replace each other, so calling this in a tight loop costs
   * one heartbeat a second. The last report before the handler ends is
   * sent ahead of its Complete, Fail or Snooze. Throws RangeError or
   * TypeError for a value the server would refuse.
   */
  progress(value: JsonValue): void;
  /**
   * Ends this attempt without failing it: the job goes back to QUEUED,
   * eligible again after `delayMs` (0..30 days), and the attempt is
   * refunded (api.md section D, Snooze). Throws a SnoozeJob to stop the
   * handler; the job is snoozed however the handler then ends, even if it
   * catches that error and returns.
   */
  snooze(delayMs: number): never;
}

/**
 * Runs one job. The value it returns (any JSON, at most 64 KiB; `undefined`
 * for none) becomes the job's result; a thrown error fails the attempt:
 * PermanentJobError dead-letters, RetryJobError sets the retry delay, any
 * other error retries with the job's backoff while attempts remain. A
 * thrown SnoozeJob (or `ctx.snooze()`) snoozes the job instead: queued
 * again after its delay, the attempt refunded.
 */
export type JobHandler = (job: Job, ctx: JobContext) => Promise<JsonValue | void> | JsonValue | void;

/** What the worker reports through `onEvent`; for logs, metrics and tests. */
export type WorkerEvent =
  /** The stream (Work, or StreamClaims over HTTP/1.1) is open and registered: its first message arrived. */
  | { type: "connected" }
  /** The stream broke; the worker reconnects after `retryInMs`. */
  | { type: "disconnected"; error: ConnectError; retryInMs: number }
  /**
   * The server refused the stream because of the worker's credentials:
   * `error.code` is `unauthenticated` (no token, or one the auth file does
   * not have) or `permission_denied` (the token lacks the `worker` role or
   * the queue), `error.rawMessage` says which. Nothing is leased until the
   * token or the server's auth file changes; the worker tries again after
   * `retryInMs` (backoff up to `reconnectBackoff.maxMs`), so a file
   * reloaded with SIGHUP takes effect without a restart. Call close() to
   * give up instead.
   */
  | { type: "refused"; error: ConnectError; retryInMs: number }
  /** A lease arrived. */
  | { type: "lease"; job: Job }
  /** A heartbeat extended a lease; `job.leaseExpireTime` is the new expiry. */
  | { type: "heartbeat"; job: Job }
  /**
   * Complete succeeded. `job` is the leased job moved to COMPLETED with its
   * result, as the acknowledgement's answer implies (answers carry a status,
   * not the job; GetJob reads the stored one).
   */
  | { type: "completed"; job: Job }
  /**
   * Fail succeeded; `job` is the leased job moved to RETRY or DEAD, with
   * `lastError`. Its `scheduleTime` is set only when the handler chose the
   * delay (RetryJobError); otherwise the server's backoff decides it.
   */
  | { type: "failed"; job: Job; error: string }
  /** close() gave back a lease whose job had not started; `job` is eligible again (QUEUED or RETRY), attempt refunded. */
  | { type: "released"; job: Job }
  /** Snooze succeeded (SnoozeJob, or `ctx.snooze()`); `job` is QUEUED again, eligible after `delayMs`, attempt refunded. */
  | { type: "snoozed"; job: Job; delayMs: number }
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
  /** With `url`: a bearer token for a server with authentication on (createLeaseQueueClient's `token`). */
  token?: string;
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
  /**
   * Milliseconds an acknowledgement (Complete, Fail, Snooze, Release, Heartbeat)
   * waits for others to share its message; default 1. A batch leaves
   * earlier when it holds 1000. 0 waits one turn of the event loop.
   */
  ackBatchWindow?: number;
  /**
   * Take the Work stream (leases and acknowledgements on one HTTP/2 stream)
   * rather than StreamClaims plus Acknowledge. Default: true for a client
   * from createLeaseQueueClient over HTTP/2 (gRPC, or Connect with
   * httpVersion "2"), false for Connect over HTTP/1.1, which cannot carry
   * a bidirectional stream, and for clients made elsewhere.
   */
  workStream?: boolean;
  handler: JobHandler;
  /** Observability hook; exceptions it throws are ignored. Without it, `error`, `refused` and `disconnected` events go to the console. */
  onEvent?: (event: WorkerEvent) => void;
}

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
   * calling it again returns the same promise.
   */
  close(): Promise<void>;
}

/** The most a result may take encoded: one acknowledgement alone must fit a request, with room for its other fields. */
const MAX_RESULT_ENCODED_BYTES = DEFAULTS.maxRequestBytes - 2048;
/** After shutdownTimeout, how long close() gives the last Complete/Fail. */
const FINAL_ACK_GRACE_MS = 5000;
/**
 * Deadline of one Acknowledge call, and how long the Work stream may leave
 * an acknowledgement unanswered before the worker takes it for a dead
 * stream, cancels it and reconnects.
 */
const ACK_ANSWER_TIMEOUT_MS = 10_000;
/**
 * Failures of Complete/Fail/Release worth retrying while the lease lasts.
 * `canceled` is among them: connect-node reports a connection reset under
 * an HTTP/2 call as "stream closed with error code CANCEL", and giving up
 * there would leave a finished job to expire. The SDK's own cancellation
 * (close() past its grace) is told apart by the cutoff signal. A Work
 * stream that broke answers its unanswered acknowledgements `unavailable`.
 */
const TRANSIENT: ReadonlySet<Code> = new Set([
  Code.Canceled,
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Internal,
  Code.Unknown,
]);

const RPC_OF = { complete: "Complete", release: "Release", fail: "Fail", snooze: "Snooze" } as const;

type Outcome =
  | { kind: "complete"; result: JsonValue | undefined }
  /** Give an unstarted lease back (Release): the attempt is refunded. */
  | { kind: "release" }
  /** Put the job back for later (Snooze): the attempt is refunded. */
  | { kind: "snooze"; delayMs: number }
  | { kind: "fail"; error: string; permanent: boolean; retryDelayMs: number | undefined };

/**
 * Starts a worker on `queue`: it connects at once and keeps working until
 * close(). See WorkerOptions for defaults.
 */
export function createWorker(options: WorkerOptions): Worker {
  return new LeaseWorker(options);
}

class LeaseWorker implements Worker {
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
  readonly #acks: AckBatcher;

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
  /** The Work stream now open, if any. */
  #workStream: WorkStreamSide | undefined;
  readonly #loop: Promise<void>;
  #closed: Promise<void> | undefined;

  constructor(o: WorkerOptions) {
    if ((o.url === undefined) === (o.client === undefined)) throw new TypeError("createWorker: give exactly one of `url` and `client`");
    if (o.client !== undefined && o.token !== undefined)
      throw new TypeError("createWorker: `token` goes with `url`; with `client`, give it to createLeaseQueueClient()");
    if (!BOUNDS.name.test(o.queue)) throw new TypeError(`createWorker: queue ${JSON.stringify(o.queue)} must match ${BOUNDS.name.source}`);
    if (!BOUNDS.workerId.test(o.workerId)) throw new TypeError(`createWorker: workerId must be 1-128 chars of [A-Za-z0-9._:@/-]`);
    if (typeof o.handler !== "function") throw new TypeError("createWorker: handler must be a function");
    const [minInFlight, maxInFlight] = BOUNDS.maxInFlight;
    const concurrency = o.concurrency ?? DEFAULTS.maxInFlight;
    if (!Number.isInteger(concurrency) || concurrency < minInFlight || concurrency > maxInFlight) {
      throw new RangeError(`createWorker: concurrency must be an integer in ${minInFlight}..${maxInFlight}`);
    }
    const [minLease, maxLease] = BOUNDS.leaseDurationMs;
    const leaseDurationMs = o.leaseDuration ?? DEFAULTS.leaseDurationMs;
    if (!Number.isInteger(leaseDurationMs) || leaseDurationMs < minLease || leaseDurationMs > maxLease) {
      throw new RangeError(`createWorker: leaseDuration is in milliseconds and must be an integer in ${minLease}..${maxLease} (1 s..12 h)`);
    }
    const heartbeatIntervalMs = o.heartbeatInterval ?? Math.floor(leaseDurationMs / 3);
    if (!(heartbeatIntervalMs > 0 && heartbeatIntervalMs < leaseDurationMs))
      throw new RangeError("createWorker: heartbeatInterval must be > 0 and shorter than leaseDuration");
    const shutdownTimeoutMs = o.shutdownTimeout ?? 10_000;
    if (!(shutdownTimeoutMs >= 0)) throw new RangeError("createWorker: shutdownTimeout must be >= 0");
    const ackBatchWindowMs = o.ackBatchWindow ?? 1;
    if (!(Number.isFinite(ackBatchWindowMs) && ackBatchWindowMs >= 0 && ackBatchWindowMs <= 1000)) {
      throw new RangeError("createWorker: ackBatchWindow is in milliseconds and must be in 0..1000");
    }
    if (o.workStream !== undefined && typeof o.workStream !== "boolean") throw new TypeError("createWorker: workStream must be a boolean");

    this.workerId = o.workerId;
    this.#client = o.client ?? createLeaseQueueClient({ url: o.url!, transport: o.transport, token: o.token });
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
        if (event.type === "refused") {
          console.error(
            `leasequeue worker ${this.workerId}: the server refused the worker on queue ${this.#queue} (${event.error.message}); ` +
              `${refusalAdvice(event.error, this.#queue)}; trying again in ${event.retryInMs} ms`,
          );
        }
        return;
      }
      try {
        onEvent(event);
      } catch {
        // An observer's bug must not stop the worker.
      }
    };
    // Every Acknowledge call and retry pause listens on the cutoff signal.
    setMaxListeners(0, this.#ackCutoff.signal);
    this.#acks = new AckBatcher({
      client: this.#client,
      windowMs: ackBatchWindowMs,
      callTimeoutMs: ACK_ANSWER_TIMEOUT_MS,
      cutoff: this.#ackCutoff.signal,
    });
    const useWork = o.workStream ?? canStreamBothWays(this.#client);
    this.#loop = this.#connectLoop(
      useWork ? (connected) => this.#workStreamOnce(connected) : (connected) => this.#streamClaimsOnce(connected),
    );
  }

  get running(): number {
    return this.#handlers.size;
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  /**
   * Keeps one stream open until close(), reconnecting with jittered
   * backoff. `once` runs one stream to its end: it calls `connected` when
   * the first message arrives and returns how the stream broke, or
   * undefined when it ended because of close().
   */
  async #connectLoop(once: (connected: () => void) => Promise<ConnectError | undefined>): Promise<void> {
    const signal = this.#closing.signal;
    let failures = 0;
    while (!signal.aborted) {
      const error = await once(() => {
        failures = 0;
        this.#onEvent({ type: "connected" });
      });
      if (signal.aborted || error === undefined) break;
      const retryInMs = backoffDelay(failures++, this.#backoff);
      this.#onEvent({ type: isAuthRefusal(error) ? "refused" : "disconnected", error, retryInMs });
      await pause(retryInMs, signal);
    }
  }

  /** One Work stream: leases down, acknowledgements up (api.md section A). */
  async #workStreamOnce(connected: () => void): Promise<ConnectError | undefined> {
    const closing = this.#closing.signal;
    const side = new WorkStreamSide(
      create(WorkStartSchema, {
        queue: this.#queue,
        workerId: this.workerId,
        leaseDuration: durationFromMs(this.#leaseDurationMs),
        maxInFlight: this.#concurrency,
      }),
    );
    // close() half-closes the stream after what is batched: the server
    // answers those acknowledgements, hands out no new lease and ends it.
    const halfClose = () => {
      this.#acks.leaveStream(side, true);
      side.halfClose();
    };
    closing.addEventListener("abort", halfClose, { once: true });
    const watchdog = setInterval(() => {
      const since = side.oldestUnansweredAt;
      if (since !== undefined && performance.now() - since > ACK_ANSWER_TIMEOUT_MS) {
        side.fail(
          new ConnectError(`the Work stream left an acknowledgement unanswered for ${ACK_ANSWER_TIMEOUT_MS} ms`, Code.DeadlineExceeded),
        );
      }
    }, 1000);
    watchdog.unref();
    this.#workStream = side;
    let error: ConnectError | undefined;
    try {
      let first = true;
      for await (const message of this.#client.work(side.requests(), { signal: side.signal })) {
        if (first) {
          first = false;
          if (!closing.aborted) this.#acks.useStream(side);
          connected();
        }
        side.takeResults(message.results);
        for (const lease of message.leases) this.#accept(lease);
      }
      if (!closing.aborted) error = new ConnectError("the server ended the stream", Code.Unavailable);
    } catch (e) {
      error = side.failure ?? ConnectError.from(e);
      // A message over the server's request limit (set lower than the default): batch smaller.
      if (error.code === Code.ResourceExhausted) this.#acks.shrink();
    } finally {
      clearInterval(watchdog);
      closing.removeEventListener("abort", halfClose);
      this.#acks.leaveStream(side);
      side.fail(error ?? new ConnectError("the Work stream ended", Code.Unavailable));
      if (this.#workStream === side) this.#workStream = undefined;
    }
    return closing.aborted ? undefined : error;
  }

  /** One StreamClaims stream (HTTP/1.1): leases down; acknowledgements go by Acknowledge. */
  async #streamClaimsOnce(connected: () => void): Promise<ConnectError | undefined> {
    const signal = this.#closing.signal;
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
      let first = true;
      for await (const message of stream) {
        if (first) {
          first = false;
          connected();
        }
        if (message.lease !== undefined) this.#accept(message.lease);
      }
      return new ConnectError("the server ended the stream", Code.Unavailable);
    } catch (e) {
      return signal.aborted ? undefined : ConnectError.from(e);
    }
  }

  #accept(lease: Lease): void {
    if (lease.job === undefined) {
      this.#onEvent({ type: "error", error: new Error("the server sent a lease without a job; ignored") });
      return;
    }
    const job = lease.job;
    const held: HeldLease = new HeldLease(lease, {
      acks: this.#acks,
      leaseDurationMs: this.#leaseDurationMs,
      heartbeatIntervalMs: this.#heartbeatIntervalMs,
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

  /** Starts waiting leases while slots are free; none once close() began (they are released). */
  #startWaiting(): void {
    while (this.#handlers.size < this.#concurrency && this.#waiting.length > 0 && !this.#closing.signal.aborted) {
      const lease = this.#waiting.shift()!;
      if (lease.state !== "waiting") continue; // lost while waiting; already reported
      void this.#run(lease);
    }
    this.#checkIdle();
  }

  async #run(lease: HeldLease): Promise<void> {
    const workerId = this.workerId;
    /** Set by ctx.snooze(): decides the outcome however the handler ends. */
    let snoozed: SnoozeJob | undefined;
    const ctx: JobContext = {
      signal: lease.signal,
      payload: valueToJson(lease.job.payload),
      leaseToken: lease.token,
      get leaseExpireTime() {
        return lease.leaseExpireTime;
      },
      workerId,
      heartbeat: () => lease.heartbeat(),
      progress: (value) => lease.reportProgress(jsonToValue(checkedProgress(value))),
      snooze: (delayMs) => {
        snoozed = new SnoozeJob(delayMs);
        throw snoozed;
      },
    };
    lease.start();
    this.#handlers.add(lease);
    let outcome: Outcome;
    try {
      outcome = { kind: "complete", result: asJsonResult(await this.#handler(lease.job, ctx)) };
    } catch (err) {
      outcome = failureOf(err);
    }
    if (snoozed !== undefined) outcome = { kind: "snooze", delayMs: snoozed.delayMs };
    this.#handlers.delete(lease);
    // Lost, or close() already failed the job: the outcome is dropped.
    if (lease.state === "running") {
      const refused = outcome.kind === "complete" ? resultRefusal(outcome.result) : undefined;
      if (refused !== undefined) {
        this.#onEvent({ type: "error", error: refused, job: lease.job });
        outcome = {
          kind: "fail",
          error: truncate(`the worker refused the result: ${refused.rawMessage}`),
          permanent: false,
          retryDelayMs: undefined,
        };
      }
      this.#finish(lease, outcome);
    }
    this.#startWaiting();
  }

  #finish(lease: HeldLease, outcome: Outcome): void {
    lease.flushProgress();
    lease.finish();
    void this.#acknowledge(lease, outcome);
  }

  /**
   * Sends Complete, Fail, Snooze or Release in the next batch. Retries passing
   * failures (unavailable, a broken stream) while the lease lasts; a
   * refused lease is lost; a result the server refuses fails the job
   * instead, so it is not left to expire.
   */
  async #acknowledge(lease: HeldLease, outcome: Outcome): Promise<void> {
    const { id: jobId } = lease.job;
    /** An earlier attempt may have been applied without its answer reaching us. */
    let mayHaveApplied = false;
    for (let attempt = 0; ; attempt++) {
      const result = outcome.kind === "complete" && outcome.result !== undefined ? jsonToValue(outcome.result) : undefined;
      const answer = await this.#acks.send({ jobId, leaseToken: lease.token, outcome: ackOutcome(outcome, result) });
      if (lease.state !== "finishing") return;
      const err = answer.error;
      if (err === undefined) {
        lease.settle(outcome.kind === "release" ? "released" : "acknowledged");
        this.#reportAcknowledged(lease.job, outcome, result);
        return;
      }
      const lost = leaseLostReason(err);
      if (lost === "LEASE_REJECTED" && mayHaveApplied) {
        // Refused because an earlier attempt committed? Then it is ours, not lost.
        const applied = await this.#appliedEarlier(lease, outcome);
        if (lease.state !== "finishing") return;
        if (applied !== undefined) {
          lease.settle(outcome.kind === "release" ? "released" : "acknowledged");
          this.#reportAcknowledged(lease.job, outcome, result, applied);
          return;
        }
      }
      if (lost !== undefined) {
        lease.markLost(lost, `the server refused ${RPC_OF[outcome.kind]}: ${err.rawMessage}`);
        return;
      }
      if (answer.outcomeUnknown === true) mayHaveApplied = true;
      if (outcome.kind === "complete" && err.code === Code.InvalidArgument) {
        this.#onEvent({ type: "error", error: err, job: lease.job });
        outcome = {
          kind: "fail",
          error: truncate(`the server refused the result: ${err.rawMessage}`),
          permanent: false,
          retryDelayMs: undefined,
        };
        continue;
      }
      if (!TRANSIENT.has(err.code) || this.#ackCutoff.signal.aborted) {
        lease.settle("dropped");
        this.#onEvent({ type: "error", error: err, job: lease.job });
        return;
      }
      if (lease.expiredLocally) {
        lease.markLost("EXPIRED_LOCALLY", `could not ${outcome.kind} the job before the lease ran out: ${err.rawMessage}`);
        return;
      }
      this.#onEvent({ type: "error", error: err, job: lease.job });
      await pause(Math.min(2000, 100 * 2 ** attempt), this.#ackCutoff.signal);
    }
  }

  /**
   * The stored job when it shows that an earlier attempt of `outcome` was
   * applied (the state it leads to, and no claim since: same deliveries);
   * undefined when it does not, or cannot be read.
   */
  async #appliedEarlier(lease: HeldLease, outcome: Outcome): Promise<Job | undefined> {
    let job: Job | undefined;
    try {
      job = (await this.#client.getJob({ jobId: lease.job.id }, { timeoutMs: ACK_ANSWER_TIMEOUT_MS, signal: this.#ackCutoff.signal })).job;
    } catch {
      return undefined;
    }
    if (job === undefined || job.deliveries !== lease.job.deliveries) return undefined;
    switch (outcome.kind) {
      case "complete":
        return job.state === JobState.COMPLETED ? job : undefined;
      case "fail":
        return (job.state === JobState.RETRY || job.state === JobState.DEAD) && job.lastError === outcome.error ? job : undefined;
      case "release":
        return (job.state === JobState.QUEUED || job.state === JobState.RETRY) && job.attempts === lease.job.attempts - 1 ? job : undefined;
      case "snooze":
        return job.state === JobState.QUEUED && job.attempts === lease.job.attempts - 1 ? job : undefined;
    }
  }

  /**
   * The event of an accepted acknowledgement, with the stored job when it
   * was read, else the job as the acknowledgement left it.
   */
  #reportAcknowledged(job: Job, outcome: Outcome, result: Value | undefined, stored?: Job): void {
    if (stored !== undefined) {
      if (outcome.kind === "complete") this.#onEvent({ type: "completed", job: stored });
      else if (outcome.kind === "fail") this.#onEvent({ type: "failed", job: stored, error: outcome.error });
      else if (outcome.kind === "snooze") this.#onEvent({ type: "snoozed", job: stored, delayMs: outcome.delayMs });
      else this.#onEvent({ type: "released", job: stored });
      return;
    }
    const now = Date.now();
    const left = { workerId: "", leaseExpireTime: undefined, updateTime: timestampFromMs(now) };
    switch (outcome.kind) {
      case "complete":
        this.#onEvent({
          type: "completed",
          job: {
            ...job,
            ...left,
            state: JobState.COMPLETED,
            result,
            finishTime: timestampFromMs(now),
          },
        });
        return;
      case "fail": {
        const retry = !outcome.permanent && job.attempts < job.maxAttempts;
        this.#onEvent({
          type: "failed",
          error: outcome.error,
          job: {
            ...job,
            ...left,
            state: retry ? JobState.RETRY : JobState.DEAD,
            lastError: outcome.error,
            scheduleTime: retry && outcome.retryDelayMs !== undefined ? timestampFromMs(now + outcome.retryDelayMs) : undefined,
            finishTime: retry ? undefined : timestampFromMs(now),
          },
        });
        return;
      }
      case "release": {
        const attempts = job.attempts - 1;
        this.#onEvent({
          type: "released",
          job: { ...job, ...left, state: attempts > 0 ? JobState.RETRY : JobState.QUEUED, attempts, scheduleTime: timestampFromMs(now) },
        });
        return;
      }
      case "snooze":
        this.#onEvent({
          type: "snoozed",
          delayMs: outcome.delayMs,
          job: {
            ...job,
            ...left,
            state: JobState.QUEUED,
            attempts: job.attempts - 1,
            scheduleTime: timestampFromMs(now + outcome.delayMs),
          },
        });
        return;
    }
  }

  async #shutdown(): Promise<void> {
    this.#closing.abort(); // half-closes Work (or cancels StreamClaims); no handler starts after this
    const ended = await within(this.#loop, this.#shutdownTimeoutMs + FINAL_ACK_GRACE_MS);
    if (!ended) {
      this.#workStream?.fail(new ConnectError("the server did not end the Work stream after close()", Code.DeadlineExceeded));
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

/** The acknowledgement's outcome field for an Outcome. */
function ackOutcome(outcome: Outcome, result: Value | undefined): NonNullable<MessageInitShape<typeof AcknowledgementSchema>["outcome"]> {
  switch (outcome.kind) {
    case "complete":
      return { case: "complete", value: { result } };
    case "release":
      return { case: "release", value: {} };
    case "snooze":
      return { case: "snooze", value: { delay: durationFromMs(outcome.delayMs) } };
    case "fail":
      return {
        case: "fail",
        value: {
          error: outcome.error,
          permanent: outcome.permanent,
          retryDelay: outcome.retryDelayMs === undefined ? undefined : durationFromMs(outcome.retryDelayMs),
        },
      };
  }
}

/** The handler's return value as JSON (via JSON.stringify, so Dates and toJSON() behave as usual). */
function asJsonResult(value: JsonValue | void): JsonValue | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
}

/**
 * Why the server would refuse `result` (api.md "Bounds": 64 KiB of JSON, 32
 * levels; and no request body over 128 KiB, which protobuf's 9 bytes a
 * number can reach from 64 KiB of JSON), or undefined. Checked here
 * because an acknowledgement the server finds malformed or too large fails
 * its whole Acknowledge request or Work message, not just itself.
 */
function resultRefusal(result: JsonValue | undefined): ConnectError | undefined {
  if (result === undefined) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(result), "utf8");
  if (bytes > BOUNDS.jsonBytes) {
    return new ConnectError(`complete.result: is ${bytes} bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes`, Code.InvalidArgument);
  }
  // Protobuf is at most about 11 times the JSON of a tiny value, so only a large one can pass the request limit.
  if (bytes > 8 * 1024) {
    const encoded = toBinary(ValueSchema, jsonToValue(result)).byteLength;
    if (encoded > MAX_RESULT_ENCODED_BYTES) {
      return new ConnectError(
        `complete.result: encodes to ${encoded} bytes of protobuf; a request carries at most ${DEFAULTS.maxRequestBytes} bytes`,
        Code.InvalidArgument,
      );
    }
  }
  if (jsonDepth(result, BOUNDS.jsonDepth) > BOUNDS.jsonDepth) {
    return new ConnectError(`complete.result: is ${nestedTooDeepText()}`, Code.InvalidArgument);
  }
  return undefined;
}

/**
 * A progress report as plain JSON the server takes (api.md section D: at
 * most 4 KiB as compact JSON, 32 levels), or a TypeError / RangeError. The
 * handler learns at once, rather than a heartbeat failing (an
 * acknowledgement the server finds malformed fails its whole message).
 */
function checkedProgress(value: JsonValue): JsonValue {
  const json = asJsonResult(value);
  if (json === undefined) throw new TypeError("progress: must be a JSON value (got undefined or a value JSON cannot represent)");
  const bytes = Buffer.byteLength(JSON.stringify(json), "utf8");
  if (bytes > BOUNDS.progressJsonBytes) {
    throw new RangeError(`progress: is ${bytes} bytes of JSON; the limit is ${BOUNDS.progressJsonBytes} bytes`);
  }
  if (jsonDepth(json, BOUNDS.jsonDepth) > BOUNDS.jsonDepth) {
    throw new RangeError(`progress: is ${nestedTooDeepText()}`);
  }
  return json;
}

function failureOf(err: unknown): Outcome {
  if (err instanceof SnoozeJob) return { kind: "snooze", delayMs: err.delayMs };
  const error = truncate(describe(err));
  if (err instanceof PermanentJobError) return { kind: "fail", error, permanent: true, retryDelayMs: undefined };
  if (err instanceof RetryJobError) {
    return { kind: "fail", error, permanent: false, retryDelayMs: Math.round(Math.min(err.retryDelayMs, BOUNDS.retryDelayMs[1])) };
  }
  return { kind: "fail", error, permanent: false, retryDelayMs: undefined };
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message === "" ? err.name : err.message;
  return typeof err === "string" ? err : `non-error thrown: ${String(err)}`;
}

/** At most api.md's 4096 characters (counted here in UTF-16 units, never more than the code points the server counts). */
function truncate(text: string): string {
  const max = BOUNDS.textChars;
  if (text.length <= max) return text;
  let cut = text.slice(0, max - 1);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1); // never half a surrogate pair
  return `${cut}…`;
}
