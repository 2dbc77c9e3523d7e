/**
 * How an attempt ends (Outcome): Complete with its result, Fail, Snooze, or
 * Release of a lease whose handler never started; what a thrown error
 * means; and the acknowledgement that carries an outcome.
 */
import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, type Value } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { BOUNDS } from "../domain/request-bounds.js";
import type { AcknowledgementSchema } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { PermanentJobError, RetryJobError, SnoozeJob } from "./errors.js";

export type Outcome =
  | { kind: "complete"; result: JsonValue | undefined }
  /** Give an unstarted lease back (Release): the attempt is refunded. */
  | { kind: "release" }
  /** Put the job back for later (Snooze): the attempt is refunded. */
  | { kind: "snooze"; delayMs: number }
  | { kind: "fail"; error: string; permanent: boolean; retryDelayMs: number | undefined };

/** The outcome of a handler that threw `err`. */
export function failureOf(err: unknown): Outcome {
  if (err instanceof SnoozeJob) return { kind: "snooze", delayMs: err.delayMs };
  const error = truncate(describe(err));
  if (err instanceof PermanentJobError) return { kind: "fail", error, permanent: true, retryDelayMs: undefined };
  if (err instanceof RetryJobError) {
    return { kind: "fail", error, permanent: false, retryDelayMs: Math.round(Math.min(err.retryDelayMs, BOUNDS.retryDelayMs[1])) };
  }
  return { kind: "fail", error, permanent: false, retryDelayMs: undefined };
}

/** The Fail that replaces a Complete whose result `by` refused: retried while attempts remain, so it is not left to expire. */
export function resultRefused(by: "worker" | "server", err: ConnectError): Outcome {
  return { kind: "fail", error: truncate(`the ${by} refused the result: ${err.rawMessage}`), permanent: false, retryDelayMs: undefined };
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message === "" ? err.name : err.message;
  return typeof err === "string" ? err : `non-error thrown: ${String(err)}`;
}

/** At most the 4096 characters of docs/api.md "Bounds" (counted here in UTF-16 units, never more than the code points the server counts). */
function truncate(text: string): string {
  const max = BOUNDS.textChars;
  if (text.length <= max) return text;
  let cut = text.slice(0, max - 1);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1); // never half a surrogate pair
  return `${cut}…`;
}

/** The acknowledgement's outcome field for an Outcome. */
export function ackOutcome(
  outcome: Outcome,
  result: Value | undefined,
): NonNullable<MessageInitShape<typeof AcknowledgementSchema>["outcome"]> {
  switch (outcome.kind) {
    case "complete":
      return { case: "complete", value: { result } };
    case "release":
      return { case: "release", value: {} };
    case "snooze":
      return { case: "snooze", value: { delay: durationFromMs(outcome.delayMs) } };
    case "fail":
      return {
        case: "fail",
        value: {
          error: outcome.error,
          permanent: outcome.permanent,
          retryDelay: outcome.retryDelayMs === undefined ? undefined : durationFromMs(outcome.retryDelayMs),
        },
      };
  }
}
