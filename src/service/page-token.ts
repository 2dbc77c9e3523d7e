/**
 * Page tokens of ListJobs and ListGroups. They are opaque to clients
 * (AIP-158): the last job id (ListJobs) or group_key (ListGroups) of a page,
 * bound to the RPC and the filter that produced it, so that a token is
 * refused when the next request is another RPC or asks for a different
 * queue, states or group.
 */
import type { JobState } from "../domain/job.js";
import { invalidArgument } from "./errors.js";

/** The RPCs that page with these tokens. */
export type PagedRpc = "ListJobs" | "ListGroups";

/** What a token of each RPC is bound to, as its refusal names it. */
const FILTER_OF: Record<PagedRpc, string> = {
  ListJobs: "queue, states or group_key filter",
  ListGroups: "queue",
};

/**
 * ListJobs' filter a token is bound to: the queue, the set of states in a
 * canonical order, and the group_key when one is set (left out when not, so
 * that a token issued before groups existed still reads as the same filter).
 */
export function listFilterKey(
  queue: string | undefined,
  states: readonly JobState[],
  groupKey = "",
  related: { dependenciesOf?: string; dependentsOf?: string } = {},
): string {
  const filter: unknown[] = [queue ?? "", [...states].sort()];
  if (groupKey !== "") filter.push(groupKey);
  // Appended only when set, so that tokens issued before these filters existed still match.
  if (related.dependenciesOf !== undefined) filter.push(["dependencies_of", related.dependenciesOf]);
  if (related.dependentsOf !== undefined) filter.push(["dependents_of", related.dependentsOf]);
  return JSON.stringify(filter);
}

/** ListGroups' filter a token is bound to: the queue. */
export function groupsFilterKey(queue: string): string {
  return JSON.stringify([queue]);
}

/** A token for the page after `last` (ListJobs' tokens carry no RPC name, as before ListGroups existed). */
export function encodePageToken(last: string, filter: string, rpc: PagedRpc = "ListJobs"): string {
  const token = rpc === "ListJobs" ? { b: last, f: filter } : { b: last, f: filter, r: rpc };
  return Buffer.from(JSON.stringify(token)).toString("base64url");
}

/** The last id or key of the previous page; invalid_argument on `page_token` for a token `rpc` did not issue for `filter`. */
export function decodePageToken(token: string, filter: string, rpc: PagedRpc = "ListJobs"): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw invalidArgument("page_token", `is not a token returned by ${rpc}`);
  }
  const { b, f, r = "ListJobs" } = (parsed ?? {}) as { b?: unknown; f?: unknown; r?: unknown };
  if (typeof b !== "string" || typeof f !== "string" || r !== rpc) {
    throw invalidArgument("page_token", `is not a token returned by ${rpc}`);
  }
  if (f !== filter) throw invalidArgument("page_token", `was issued for a different ${FILTER_OF[rpc]}`);
  return b;
}
