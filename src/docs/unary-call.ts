/**
 * One unary RPC sent as the Connect protocol's JSON (what curl sends):
 * POST <path> with Content-Type application/json and the body exactly as
 * typed, so the server, not the page, judges it.
 */
import { readWireError, type WireError } from "./wire-error.js";
import { callHeaders } from "./token.js";

export type UnaryOutcome =
  /** 200: the response message as JSON. */
  | { kind: "response"; status: number; json: unknown }
  /** A Connect error. */
  | { kind: "error"; status: number; error: WireError }
  /** An answer that is not Connect's (a proxy, a 404 page): its status and text. */
  | { kind: "http"; status: number; text: string }
  /** Nothing answered. */
  | { kind: "unreachable"; message: string };

export async function callUnary(path: string, body: string, signal?: AbortSignal): Promise<UnaryOutcome> {
  let res: Response;
  try {
    res = await fetch(path, { method: "POST", headers: callHeaders("application/json"), body, signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    return { kind: "unreachable", message: err instanceof Error ? err.message : String(err) };
  }
  const text = await res.text();
  const json = parseJson(text, res.headers.get("content-type"));
  if (res.status === 200 && json !== undefined) return { kind: "response", status: res.status, json };
  const error = readWireError(json);
  if (res.status !== 200 && error !== undefined) return { kind: "error", status: res.status, error };
  return { kind: "http", status: res.status, text };
}

function parseJson(text: string, contentType: string | null): unknown {
  if (contentType === null || !/^application\/json\b/.test(contentType)) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
