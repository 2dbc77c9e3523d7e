/**
 * Refusals that no retry can cure: the server said no to the stream (or
 * the Claim) because of what the worker sent or who it is, not because of
 * a passing failure. The worker stops on these instead of reconnecting
 * (docs/writing-a-worker.md "Reconnects"), as the Python and Go workers do.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";

const FINAL: ReadonlySet<Code> = new Set([Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied, Code.Unimplemented]);

/**
 * True for a refusal the worker stops on:
 * - `invalid_argument`: the server refused the request (a worker id or
 *   queue it does not accept, say from an interceptor that rewrites them),
 *   unless it names an acknowledgement (`acks[i]...`): that one is refused
 *   on its own when sent again, so the stream is reopened as for a passing
 *   failure;
 * - `unauthenticated`: no token, a malformed one, or one not in the
 *   server's LEASEQUEUE_AUTH_FILE;
 * - `permission_denied`: the token lacks the `worker` role or the queue;
 * - `unimplemented`: the server does not serve the call.
 *
 * Every other code (`unavailable`, `internal`, `resource_exhausted`,
 * `aborted`, `deadline_exceeded`, a dropped connection) is passing: the
 * worker reconnects with backoff.
 */
export function isFinalRefusal(error: ConnectError): boolean {
  return FINAL.has(error.code) && !(error.code === Code.InvalidArgument && namesAnAcknowledgement(error));
}

/** An `invalid_argument` about one acknowledgement of a batch (`acks[3].lease_token: ...`), not about the worker. */
function namesAnAcknowledgement(error: ConnectError): boolean {
  const fields = error.findDetails(BadRequestSchema).flatMap((bad) => bad.fieldViolations.map((v) => v.field));
  return [...fields, error.rawMessage].some((text) => text.startsWith("acks["));
}

/** What to check, for the console line of a worker without `onEvent`; never contains the token. */
export function refusalAdvice(error: ConnectError, queue: string): string {
  switch (error.code) {
    case Code.Unauthenticated:
      return "give the worker a token (createLeaseQueueClient's `token`) that is in the server's LEASEQUEUE_AUTH_FILE";
    case Code.PermissionDenied:
      return `the token's entry in LEASEQUEUE_AUTH_FILE needs the role "worker" and, if it lists queues, "${queue}"`;
    case Code.Unimplemented:
      return "the server does not serve this call: check the URL, or take another path (`transport`, `workStream`)";
    default:
      return "the server does not accept the worker's request: check the options (and any interceptor that rewrites requests)";
  }
}
