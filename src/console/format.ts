/** Turning wire values into the words and numbers an operator reads. */
import { toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema, type Duration, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { formatDurationText } from "../domain/duration-text.js";
import { EventKind, JobState } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

/** The states an operator filters by, in lifecycle order, with their URL names. */
export const STATES: readonly { state: JobState; name: string; label: string }[] = [
  { state: JobState.WAITING, name: "waiting", label: "Waiting" },
  { state: JobState.QUEUED, name: "queued", label: "Queued" },
  { state: JobState.RUNNING, name: "running", label: "Running" },
  { state: JobState.RETRY, name: "retry", label: "Retry" },
  { state: JobState.COMPLETED, name: "completed", label: "Completed" },
  { state: JobState.DEAD, name: "dead", label: "Dead" },
  { state: JobState.CANCELLED, name: "cancelled", label: "Cancelled" },
];

export function stateName(state: JobState): string {
  return STATES.find((s) => s.state === state)?.name ?? "unspecified";
}

export function stateLabel(state: JobState): string {
  return STATES.find((s) => s.state === state)?.label ?? "—";
}

export function stateFromName(name: string | undefined): JobState | undefined {
  return STATES.find((s) => s.name === name)?.state;
}

/** EVENT_KIND_DEAD_LETTERED -> "dead-lettered". */
export function kindLabel(kind: EventKind): string {
  const name = EventKind[kind] ?? "UNSPECIFIED";
  return name.toLowerCase().replace(/_/g, "-");
}

/** UTC, to the second: 2026-11-30 13:08:50Z. Empty for an absent timestamp. */
export function formatTime(ts: Timestamp | undefined): string {
  if (ts === undefined) return "";
  return timestampDate(ts)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

/** Like formatTime, but only the time of day when it is today (UTC). */
export function formatTimeCompact(ts: Timestamp | undefined, now = new Date()): string {
  const full = formatTime(ts);
  const today = now.toISOString().slice(0, 10);
  return full.startsWith(today) ? full.slice(11) : full;
}

/**
 * How long ago `ts` was, at a glance ("4 min 10 s"), or "in 2 min" when it
 * is ahead (a retry's next attempt). Less than a second ahead reads as "0 s":
 * the browser's clock and the server's are not the same clock.
 */
export function formatRelativeTime(ts: Timestamp, now = Date.now()): string {
  const ms = now - timestampDate(ts).getTime();
  return ms > -1000 ? formatDurationText(Math.max(0, ms), "glance") : `in ${formatDurationText(-ms, "glance")}`;
}

export function isoTime(ts: Timestamp | undefined): string | undefined {
  return ts === undefined ? undefined : timestampDate(ts).toISOString();
}

export function durationMs(d: Duration | undefined): number {
  if (d === undefined) return 0;
  return Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6);
}

/** A google.protobuf.Value as indented JSON ("null" when absent). */
export function formatValue(value: Value | undefined): string {
  if (value === undefined) return "null";
  return JSON.stringify(toJson(ValueSchema, value), null, 2);
}

/** A google.protobuf.Value as one line of compact JSON (a job's progress). */
export function formatCompactValue(value: Value): string {
  return JSON.stringify(toJson(ValueSchema, value));
}

export function formatCount(n: bigint): string {
  return n.toLocaleString("en-US");
}
