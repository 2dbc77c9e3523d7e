/**
 * ListJobs page tokens. They are opaque to clients (AIP-158): the last job
 * id of a page, bound to the filter that produced it, so that a token is
 * refused when the next request asks for a different queue or states.
 */
import type { JobState } from "../domain/job.js";
import { invalidArgument } from "./errors.js";

/** The filter a token is bound to: the queue and the set of states, in a canonical order. */
export function listFilterKey(queue: string | undefined, states: readonly JobState[]): string {
  return JSON.stringify([queue ?? "", [...states].sort()]);
}

export function encodePageToken(lastId: string, filter: string): string {
  return Buffer.from(JSON.stringify({ b: lastId, f: filter })).toString("base64url");
}

/** The last id of the previous page; invalid_argument on `page_token` for a token ListJobs did not issue for `filter`. */
export function decodePageToken(token: string, filter: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw invalidArgument("page_token", "is not a token returned by ListJobs");
  }
  const { b, f } = (parsed ?? {}) as { b?: unknown; f?: unknown };
  if (typeof b !== "string" || typeof f !== "string") {
    throw invalidArgument("page_token", "is not a token returned by ListJobs");
  }
  if (f !== filter) throw invalidArgument("page_token", "was issued for a different queue or states filter");
  return b;
}
