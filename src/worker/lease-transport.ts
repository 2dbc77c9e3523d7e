/**
 * How leases reach the worker. A LeaseTransport runs one stream at a time:
 * the Work stream over HTTP/2 (work-stream-transport.ts), StreamClaims
 * with acknowledgements by Acknowledge over HTTP/1.1
 * (stream-claims-transport.ts), or, with no stream at all, a loop of
 * Claims carrying acknowledgements (claim-transport.ts).
 * keepConnected keeps one open until close(), reconnecting with jittered
 * backoff, or until the server refuses it in a way no retry can cure
 * (refusal.ts).
 */
import type { ConnectError } from "@connectrpc/connect";
import type { Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { backoffDelay, pause, type BackoffOptions } from "./backoff.js";
import type { LeaseQueueClient } from "./client.js";
import { isFinalRefusal } from "./refusal.js";
import type { ReportEvent } from "./worker-events.js";

/** What a transport needs to open a stream and hand its leases on. */
export interface LeaseTransportOptions {
  client: LeaseQueueClient;
  queue: string;
  workerId: string;
  leaseDurationMs: number;
  /** The stream's `max_in_flight`: the worker's concurrency. */
  maxInFlight: number;
  /** Aborted by close(): ends the stream. */
  closing: AbortSignal;
  /** Takes each lease that arrives. */
  accept(lease: Lease): void;
  /** A job whose lease the stream sent was cancelled while running (docs/api.md "Cancelling a running job"). */
  cancelled(jobId: string): void;
}

export interface LeaseTransport {
  /**
   * Runs one stream to its end: calls `connected` when the first message
   * arrives and returns how the stream broke, or undefined when it ended
   * because of close().
   */
  once(connected: () => void): Promise<ConnectError | undefined>;
  /** Cuts the open stream off, if any: the server did not end it after close(). */
  abandon(cause: ConnectError): void;
  /** The worker's free slots changed; only a transport that asks for leases itself (Claim) listens. */
  roomChanged?(): void;
}

/**
 * Keeps one stream of `transport` open until `closing` aborts, reconnecting
 * with jittered backoff; reports `connected`, and `disconnected` with the
 * wait before the next try. Returns the refusal it stopped on
 * (isFinalRefusal: `invalid_argument`, `unauthenticated`,
 * `permission_denied`, `unimplemented`), or undefined when `closing`
 * ended it.
 */
export async function keepConnected(
  transport: LeaseTransport,
  { closing, backoff, onEvent }: { closing: AbortSignal; backoff: BackoffOptions; onEvent: ReportEvent },
): Promise<ConnectError | undefined> {
  let failures = 0;
  while (!closing.aborted) {
    const error = await transport.once(() => {
      failures = 0;
      onEvent({ type: "connected" });
    });
    if (closing.aborted || error === undefined) break;
    if (isFinalRefusal(error)) return error;
    const retryInMs = backoffDelay(failures++, backoff);
    onEvent({ type: "disconnected", error, retryInMs });
    await pause(retryInMs, closing);
  }
  return undefined;
}
