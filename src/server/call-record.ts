/**
 * What the RPC adapter and the boundary interceptor share about one call:
 * whether the interceptor saw it (connect parses and refuses some requests
 * before any interceptor runs, and the adapter must then count them), and
 * whether the call was cut short (a reset or a closed connection is the
 * client's choice, `canceled`, never a server failure).
 */
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";

export interface CallRecord {
  /** Set once the call is in the RPC metrics, by the boundary interceptor or (for calls it never saw, or saw after the client left) by the adapter. */
  observed: boolean;
  /**
   * Why the call was cut short, if it was: `canceled` once the client reset
   * the stream or closed the connection before the response was complete,
   * `deadline_exceeded` if the listener refused a request that did not
   * arrive in time (http2-request-timeout.ts); undefined otherwise.
   */
  cutShort(): Code.Canceled | Code.DeadlineExceeded | undefined;
}

/** Context value carrying the {@link CallRecord} of the current call; undefined outside the adapter (tests in memory). */
export const callRecordKey = createContextKey<CallRecord | undefined>(undefined, { description: "leasequeue call record" });

/** connect-es words every undecodable binary message this way, and as `internal`. */
const BINARY_PARSE_PREFIX = "parse binary: ";

/**
 * connect-es reports a request message that is not valid binary protobuf as
 * `internal` (the same code serves a client that cannot parse a server's
 * answer). On a server, that is the client's mistake: `invalid_argument` in docs/api.md "Errors".
 * Returns the translated error, or undefined if `message` is not such an error.
 */
export function requestParseError(code: Code, rawMessage: string, inputTypeName: string): ConnectError | undefined {
  if (code !== Code.Internal || !rawMessage.startsWith(BINARY_PARSE_PREFIX)) return undefined;
  const detail = rawMessage.slice(BINARY_PARSE_PREFIX.length);
  return new ConnectError(`request message is not a valid binary ${inputTypeName}: ${detail}`, Code.InvalidArgument);
}
