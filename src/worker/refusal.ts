/**
 * A stream the server refused because of who the worker is: with
 * authentication on (LEASEQUEUE_AUTH_FILE), `unauthenticated` (no token, a
 * malformed one, or one not in the file) or `permission_denied` (the
 * token lacks the `worker` role or the queue). Retrying cannot help until
 * someone changes the token or the file, so the worker reports these as
 * `refused`, not as a passing `disconnected`; it still retries with backoff,
 * because a file reloaded with SIGHUP takes effect without a restart.
 */
import { Code, type ConnectError } from "@connectrpc/connect";

export function isAuthRefusal(error: ConnectError): boolean {
  return error.code === Code.Unauthenticated || error.code === Code.PermissionDenied;
}

/** What to check, for the console line of a worker without `onEvent`; never contains the token. */
export function refusalAdvice(error: ConnectError, queue: string): string {
  return error.code === Code.Unauthenticated
    ? "give the worker a token (createLeaseQueueClient's `token`) that is in the server's LEASEQUEUE_AUTH_FILE"
    : `the token's entry in LEASEQUEUE_AUTH_FILE needs the role "worker" and, if it lists queues, "${queue}"`;
}
