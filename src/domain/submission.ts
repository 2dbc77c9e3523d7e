import { createHash } from "node:crypto";

/** A submit request after validation and defaults (api.md "Defaults and identity"). */
export interface NewJob {
  queue: string;
  task: string;
  /** Compact JSON text ("null" when absent). */
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  retryBaseDelayMs: number;
  /** Absolute start (`schedule_time`), relative start (`delay`), or now. */
  schedule: { at: number } | { delayMs: number } | null;
  idempotencyKey: string | null;
}

export function scheduleTimeOf(job: NewJob, now: number): number {
  if (job.schedule === null) return now;
  return "at" in job.schedule ? job.schedule.at : now + job.schedule.delayMs;
}

/**
 * The identity of a submit request for idempotency: the request after
 * defaults, with object keys in a canonical order, so the same request sent
 * again (with or without default fields, key given as header or field)
 * matches, and any difference does not. A relative `delay` is compared as
 * given, not as the time it resolved to.
 */
export function submitFingerprint(job: NewJob): string {
  const identity = [
    job.queue,
    job.task,
    canonicalJson(JSON.parse(job.payloadJson)),
    job.priority,
    job.maxAttempts,
    job.retryBaseDelayMs,
    job.schedule === null ? null : "at" in job.schedule ? ["at", job.schedule.at] : ["delay", job.schedule.delayMs],
  ];
  return createHash("sha256").update(JSON.stringify(identity)).digest("base64url");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}
