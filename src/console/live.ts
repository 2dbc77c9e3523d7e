/**
 * One WatchEvents subscription for the whole console. Views subscribe to its
 * signals and refetch what an event touches.
 *
 * - Live: the stream's first message (an empty keepalive) means it is
 *   subscribed; events are passed on in sequence order, duplicates dropped.
 * - When the stream fails, the feed re-subscribes with exponential backoff,
 *   resuming with `after_sequence` = the last sequence seen, so nothing is
 *   missed. Meanwhile it is "degraded": every POLL_INTERVAL_MS it sends a
 *   `resync` signal so that views refetch (polling), and the console says so.
 * - `out_of_range` (the resume point was pruned) restarts from "now" and
 *   sends a `resync`, as does every successful re-subscription (what happened
 *   while no stream was open is refetched, not replayed).
 */
import { backoffCeilingMs } from "../domain/backoff.js";
import type { JobEvent, WatchEventsRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client, describeError } from "./api.js";

/** How often views refetch while live updates are unavailable. */
export const POLL_INTERVAL_MS = 5_000;
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** A stream that stayed open this long and then ended is re-opened at once, without degrading. */
const HEALTHY_STREAM_MS = 5_000;

export type LiveSignal = { kind: "event"; event: JobEvent } | { kind: "resync" };

export type LiveStatus = { mode: "connecting" } | { mode: "live" } | { mode: "degraded"; reason: string; retryInMs: number };

type WatchRequest = Partial<Pick<WatchEventsRequest, "queue" | "jobId" | "afterSequence">>;

export class LiveFeed {
  status: LiveStatus = { mode: "connecting" };
  private readonly listeners = new Set<(signal: LiveSignal) => void>();
  private readonly statusListeners = new Set<(status: LiveStatus) => void>();
  private lastSequence: bigint | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private running = false;
  /** Ends the wait before the next attempt, while the feed backs off. */
  private retryNow: (() => void) | undefined;

  /** Receives every event and every resync; returns the unsubscribe function. */
  subscribe(listener: (signal: LiveSignal) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onStatus(listener: (status: LiveStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  /**
   * Re-subscribes at once instead of after the backoff (the reason it failed
   * is gone, e.g. a token was given) and tells views to refetch.
   */
  reconnectNow(): void {
    this.retryNow?.();
    this.emit({ kind: "resync" });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.run();
  }

  private async run(): Promise<void> {
    let failures = 0;
    let subscribedBefore = false;
    for (;;) {
      let openedAt: number | undefined;
      let reason: string;
      try {
        const request: WatchRequest = this.lastSequence === undefined ? {} : { afterSequence: this.lastSequence };
        for await (const res of client.watchEvents(request)) {
          if (openedAt === undefined) {
            openedAt = Date.now();
            const wasDegraded = this.status.mode === "degraded";
            this.setStatus({ mode: "live" });
            this.stopPolling();
            // Whatever changed while no stream was open is refetched.
            if (subscribedBefore || wasDegraded) this.emit({ kind: "resync" });
            subscribedBefore = true;
          }
          const event = res.event;
          if (event === undefined) continue; // keepalive
          if (this.lastSequence !== undefined && event.sequence <= this.lastSequence) continue;
          this.lastSequence = event.sequence;
          this.emit({ kind: "event", event });
        }
        reason = "the event stream ended";
      } catch (err) {
        const problem = describeError(err);
        if (problem.code === "out_of_range") {
          // The resume point is older than every kept event: start from now.
          this.lastSequence = undefined;
          this.emit({ kind: "resync" });
          continue;
        }
        reason = problem.unreachable ? `server unreachable: ${problem.message}` : `${problem.code}: ${problem.message}`;
      }
      if (openedAt !== undefined && Date.now() - openedAt >= HEALTHY_STREAM_MS) {
        // A long-lived stream ended (server restart, proxy timeout, slow
        // subscriber cut off): resume at once from the last sequence.
        failures = 0;
        continue;
      }
      // Streams that fail, or open and end at once, back off further each time.
      failures++;
      const delay = backoffCeilingMs(failures - 1, { initialMs: BACKOFF_FIRST_MS, maxMs: BACKOFF_MAX_MS }) * (0.8 + Math.random() * 0.4);
      this.setStatus({ mode: "degraded", reason, retryInMs: delay });
      this.startPolling();
      if (await this.pause(delay)) failures = 0;
    }
  }

  /** Waits `ms`; resolves true if reconnectNow() ended the wait early. */
  private pause(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.retryNow = undefined;
        resolve(false);
      }, ms);
      this.retryNow = () => {
        clearTimeout(timer);
        this.retryNow = undefined;
        resolve(true);
      };
    });
  }

  private startPolling(): void {
    this.pollTimer ??= setInterval(() => this.emit({ kind: "resync" }), POLL_INTERVAL_MS);
  }

  private stopPolling(): void {
    if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }

  private setStatus(status: LiveStatus): void {
    this.status = status;
    for (const listener of this.statusListeners) listener(status);
  }

  private emit(signal: LiveSignal): void {
    for (const listener of this.listeners) listener(signal);
  }
}

export const liveFeed = new LiveFeed();
