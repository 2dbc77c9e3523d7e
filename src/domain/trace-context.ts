/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as a job carries
 * it (docs/api.md "Trace context"): the `traceparent` and `tracestate` of the
 * job's producer, checked against the Recommendation's syntax, and the
 * fallback to the Submit call's headers.
 *
 * It imports nothing but the bounds table (not even a Node built-in): the
 * worker SDK and the console may use it, as they use request-bounds.ts.
 */
import { BOUNDS } from "./request-bounds.js";

/** Most bytes (UTF-8) of one trace_context value (docs/api.md "Bounds"). */
const TRACE_CONTEXT_VALUE_BYTES = BOUNDS.traceContextBytes;

/** A job's trace context: a valid traceparent, and its tracestate ("" when none). */
export interface TraceContext {
  readonly traceparent: string;
  readonly tracestate: string;
}

/**
 * version "-" trace-id "-" parent-id "-" trace-flags, lower-case hex (§3.2).
 * A version after 00 may append fields after a dash; version ff is invalid.
 */
export const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * A tracestate list member's key: a simple key, or tenant@system (§3.3.1.3.1),
 * and its value: 1..256 printable ASCII characters but `,` and `=`, not
 * ending in a space (§3.3.1.3.2).
 */
export const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** Most list members of a tracestate (§3.3.1.1). */
export const TRACESTATE_MEMBERS = 32;

/**
 * The refusals of a bad trace_context, as invalid_argument words them after
 * `trace_context: ` (the PostgreSQL submit() function raises the same).
 */
export const TRACE_CONTEXT_PROBLEMS = {
  key: (key: string) => `has the key ${JSON.stringify(key)}; the keys are traceparent and tracestate`,
  tooLong: (key: string) => `${key} must be at most ${TRACE_CONTEXT_VALUE_BYTES} bytes`,
  traceparent: "traceparent must be version-traceid-parentid-flags in lower-case hex (W3C Trace Context)",
  version: "traceparent version ff is invalid",
  fields: "traceparent of version 00 has exactly four fields",
  traceId: "traceparent trace-id must not be all zeros",
  parentId: "traceparent parent-id must not be all zeros",
  tracestate: "tracestate must be a list of key=value members (W3C Trace Context)",
  members: `tracestate must have at most ${TRACESTATE_MEMBERS} list members`,
  orphanTracestate: "tracestate needs a traceparent",
} as const;

const ALL_ZERO = /^0+$/;

/** Why `value` is not a traceparent, or undefined when it is one. */
export function traceparentProblem(value: string): string | undefined {
  const m = TRACEPARENT.exec(value);
  if (m === null) return TRACE_CONTEXT_PROBLEMS.traceparent;
  const [, version, traceId, parentId, , rest] = m;
  if (version === "ff") return TRACE_CONTEXT_PROBLEMS.version;
  if (version === "00" && rest !== undefined) return TRACE_CONTEXT_PROBLEMS.fields;
  if (ALL_ZERO.test(traceId)) return TRACE_CONTEXT_PROBLEMS.traceId;
  if (ALL_ZERO.test(parentId)) return TRACE_CONTEXT_PROBLEMS.parentId;
  return undefined;
}

/** Why `value` is not a tracestate list, or undefined when it is one (empty members are allowed, §3.3.1.1). */
export function tracestateProblem(value: string): string | undefined {
  let members = 0;
  for (const raw of value.split(",")) {
    const member = raw.replace(/^[ \t]+|[ \t]+$/g, "");
    if (member === "") continue;
    if (!TRACESTATE_MEMBER.test(member)) return TRACE_CONTEXT_PROBLEMS.tracestate;
    members++;
  }
  if (members > TRACESTATE_MEMBERS) return TRACE_CONTEXT_PROBLEMS.members;
  return undefined;
}

/** UTF-8 bytes of a string, without Buffer or TextEncoder allocations for the ASCII a valid value is. */
function utf8Bytes(value: string): number {
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? (i++, 4) : 3;
  }
  return n;
}

/**
 * SubmitRequest.trace_context as a TraceContext: null for an empty map,
 * else the context, or a `problem` (the message of invalid_argument naming
 * the field) for an unknown key, a value over 512 bytes, a malformed
 * traceparent or tracestate, or a tracestate without a traceparent.
 */
export function traceContextOf(map: Readonly<Record<string, string>>): { context: TraceContext | null } | { problem: string } {
  let traceparent: string | undefined;
  let tracestate = "";
  for (const [key, value] of Object.entries(map)) {
    if (key !== "traceparent" && key !== "tracestate") return { problem: TRACE_CONTEXT_PROBLEMS.key(key) };
    if (utf8Bytes(value) > TRACE_CONTEXT_VALUE_BYTES) return { problem: TRACE_CONTEXT_PROBLEMS.tooLong(key) };
    const problem = key === "traceparent" ? traceparentProblem(value) : tracestateProblem(value);
    if (problem !== undefined) return { problem };
    if (key === "traceparent") traceparent = value;
    else tracestate = value;
  }
  if (traceparent === undefined) return "tracestate" in map ? { problem: TRACE_CONTEXT_PROBLEMS.orphanTracestate } : { context: null };
  return { context: { traceparent, tracestate } };
}

/**
 * The context of a call's `traceparent` and `tracestate` headers (null when
 * absent), read as a W3C receiver reads them (§3.2.2, §3.3.2): a malformed
 * or oversized traceparent is ignored with its tracestate, and a malformed
 * tracestate is dropped alone. Headers never refuse a call.
 */
export function traceContextFromHeaders(traceparent: string | null, tracestate: string | null): TraceContext | null {
  if (traceparent === null) return null;
  const parent = traceparent.trim();
  if (utf8Bytes(parent) > TRACE_CONTEXT_VALUE_BYTES || traceparentProblem(parent) !== undefined) return null;
  const state = tracestate?.trim() ?? "";
  const keep = state !== "" && utf8Bytes(state) <= TRACE_CONTEXT_VALUE_BYTES && tracestateProblem(state) === undefined;
  return { traceparent: parent, tracestate: keep ? state : "" };
}

/** The ids and flags of a valid traceparent (of any version: the first four fields, §3.2.4). */
export interface TraceparentFields {
  /** 32 lower-case hex digits. */
  traceId: string;
  /** 16 lower-case hex digits: the span the context names. */
  parentId: string;
  /** The trace-flags byte (bit 0: sampled). */
  flags: number;
}

/** The fields of a traceparent; undefined for one that is not valid. */
export function traceparentFields(value: string): TraceparentFields | undefined {
  if (traceparentProblem(value) !== undefined) return undefined;
  const [, , traceId, parentId, flags] = TRACEPARENT.exec(value)!;
  return { traceId, parentId, flags: parseInt(flags, 16) };
}

/** A version-00 traceparent of these fields. */
export function formatTraceparent({ traceId, parentId, flags }: TraceparentFields): string {
  return `00-${traceId}-${parentId}-${(flags & 0xff).toString(16).padStart(2, "0")}`;
}

/** A TraceContext as Job.trace_context's map: traceparent, and tracestate when there is one. */
export function traceContextMap(context: TraceContext | null): Record<string, string> {
  if (context === null) return {};
  return context.tracestate === ""
    ? { traceparent: context.traceparent }
    : { traceparent: context.traceparent, tracestate: context.tracestate };
}

function randomHex(bytes: number): string {
  const values = globalThis.crypto.getRandomValues(new Uint8Array(bytes));
  let hex = "";
  for (const b of values) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/**
 * The context of the root of a new trace, sampled: a random trace-id and
 * parent-id (never all zeros). A schedule's run starts one (docs/api.md
 * "Trace context"), its PRODUCER span recorded under these ids.
 */
export function newRootTraceContext(): TraceContext {
  let traceId = randomHex(16);
  while (ALL_ZERO.test(traceId)) traceId = randomHex(16);
  let spanId = randomHex(8);
  while (ALL_ZERO.test(spanId)) spanId = randomHex(8);
  return { traceparent: `00-${traceId}-${spanId}-01`, tracestate: "" };
}
