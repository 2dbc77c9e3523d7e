/**
 * The console's only way to the server: the generated LeaseQueueService
 * client over same-origin Connect JSON (the console is served by the API port
 * itself, so no CORS and no configuration), with the access token when the
 * server requires one (auth.ts).
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { authInterceptor } from "./auth.js";

export const client = createClient(
  LeaseQueueService,
  createConnectTransport({ baseUrl: location.origin, interceptors: [authInterceptor] }),
);

export interface ApiProblem {
  /** Connect code in its wire form, e.g. "not_found". */
  code: string;
  /** The server's message (or the browser's, when nothing answered). */
  message: string;
  /** Nothing answered: network down, server stopped, or a proxy said 502/503/504. */
  unreachable: boolean;
}

/** Connect codes as they appear on the wire (snake_case). */
export function codeName(code: Code): string {
  return (Code[code] ?? "unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

export function describeError(err: unknown): ApiProblem {
  const error = ConnectError.from(err);
  // fetch() rejects with a TypeError ("Failed to fetch") when nothing answers;
  // connect-es turns that into `unknown`.
  const unreachable = error.code === Code.Unavailable || (error.code === Code.Unknown && error.cause instanceof TypeError);
  return { code: codeName(error.code), message: error.rawMessage || "no message", unreachable };
}

/** True for an abort we caused ourselves (navigation, unmount). */
export function isAbort(err: unknown): boolean {
  return (err instanceof DOMException && err.name === "AbortError") || (err instanceof ConnectError && err.code === Code.Canceled);
}
