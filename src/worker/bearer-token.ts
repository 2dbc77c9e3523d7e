/**
 * The `token` option of createLeaseQueueClient: an interceptor that sends
 * `authorization: Bearer <token>` on every call (unary and streaming, on
 * every transport), for a server started with LEASEQUEUE_AUTH_FILE.
 *
 * The token lives only in the interceptor's closure: no error, event or
 * log line of the SDK contains it. Send it over TLS (`https://`) unless
 * the network between worker and server is private.
 */
import type { Interceptor } from "@connectrpc/connect";

/** RFC 6750 §2.1 b64token: what may follow `Bearer ` in an Authorization header. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** The interceptor for `token`; throws a TypeError (which never quotes the token) when it cannot be sent as a bearer token. */
export function bearerTokenInterceptor(token: unknown): Interceptor {
  if (typeof token !== "string") throw new TypeError(`createLeaseQueueClient: token must be a string, got ${typeof token}`);
  if (!B64TOKEN.test(token)) {
    throw new TypeError(
      `createLeaseQueueClient: token (${token.length} characters) is not a bearer token: use the token \`leasequeue hash-token\` printed, ` +
        'without "Bearer ", quotes or a trailing newline (letters, digits and -._~+/ with = at the end)',
    );
  }
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set("authorization", value);
    return next(req);
  };
}
