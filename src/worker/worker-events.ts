/**
 * What the worker reports (WorkerEvent), and where it goes: to the
 * `onEvent` observer, or, without one, the events a person must see
 * (`error`, `disconnected`) to the console.
 */
import { ConnectError } from "@connectrpc/connect";
import type { Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { LeaseLostError } from "./errors.js";
import { refusalAdvice } from "./refusal.js";

/** What the worker reports through `onEvent`; for logs, metrics and tests. */
export type WorkerEvent =
  /** The stream (Work, or StreamClaims over HTTP/1.1) is open and registered: its first message arrived. */
  | { type: "connected" }
  /** The stream broke; the worker reconnects after `retryInMs`. */
  | { type: "disconnected"; error: ConnectError; retryInMs: number }
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
  /** The job was cancelled while the worker held it; the handler's signal has been aborted with a JobCancelledError, and no outcome is sent. */
  | { type: "cancelled"; job: Job }
  /** The lease was lost; the handler's signal has been aborted with `error`. */
  | { type: "lease-lost"; job: Job; error: LeaseLostError }
  /**
   * Something went wrong. Without `fatal`, the worker worked around it (a
   * failed heartbeat, an acknowledgement that could not be sent). With
   * `fatal: true`, `error` is the server's refusal of the stream that no
   * retry can cure (a ConnectError: `error.code` `invalid_argument`,
   * `unauthenticated`, `permission_denied` or `unimplemented`,
   * `error.rawMessage` says why): the worker stops as close() stops it,
   * then reports `closed`, and `worker.closed` rejects with `error`.
   */
  | { type: "error"; error: Error; job?: Job; fatal?: boolean }
  /** close() finished. */
  | { type: "closed" };

/** Reports one event; never throws. */
export type ReportEvent = (event: WorkerEvent) => void;

/**
 * The reporter of a worker: `onEvent`, its exceptions ignored, or the
 * console when there is no observer.
 */
export function eventReporter(onEvent: ((event: WorkerEvent) => void) | undefined, workerId: string, queue: string): ReportEvent {
  return (event) => {
    if (onEvent === undefined) {
      if (event.type === "error") {
        console.error(
          event.fatal === true && event.error instanceof ConnectError
            ? `leasequeue worker ${workerId}: the server refused the worker on queue ${queue} (${event.error.message}); ` +
                `${refusalAdvice(event.error, queue)}; the worker stopped`
            : `leasequeue worker ${workerId}: ${event.error.message}`,
        );
      }
      if (event.type === "disconnected") {
        console.warn(`leasequeue worker ${workerId}: stream broke (${event.error.message}); reconnecting in ${event.retryInMs} ms`);
      }
      return;
    }
    try {
      onEvent(event);
    } catch {
      // An observer's bug must not stop the worker.
    }
  };
}
