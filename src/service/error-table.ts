/**
 * The errors the API answers with, one row per situation: the table of
 * docs/api.md "Errors" and of the reference at /docs (scripts/build-docs.mjs
 * reads it from dist/). The HTTP status of each row is Connect's for its
 * code. test/docs/reference.test.ts holds the rows to the codes and
 * ErrorInfo reasons the server sends (errors.ts), and
 * test/docs/doc-tables.test.ts holds docs/api.md to the rows.
 *
 * Cells are plain text in which `backticks` mark code; a detail names the
 * ErrorInfo reasons it carries in backticks.
 */
import { Code } from "@connectrpc/connect";

export interface ErrorTableRow {
  readonly situation: string;
  readonly code: Code;
  /** Said after the HTTP status, e.g. how HTTP/1.1 differs. */
  readonly statusNote?: string;
  /** The error detail the answer carries; "" for none. */
  readonly detail: string;
}

export const ERROR_TABLE: readonly ErrorTableRow[] = [
  {
    situation: "field out of bounds, malformed JSON, unknown JSON field, both `scheduleTime` and `delay`",
    code: Code.InvalidArgument,
    detail: "`google.rpc.BadRequest` with the field",
  },
  {
    situation: "request message that is not valid protobuf binary, JSON that is not UTF-8",
    code: Code.InvalidArgument,
    detail: "",
  },
  { situation: "request compressed with an encoding the server does not accept", code: Code.Unimplemented, detail: "" },
  {
    situation: "request not received in full within `LEASEQUEUE_REQUEST_TIMEOUT_MS`",
    code: Code.DeadlineExceeded,
    statusNote: "HTTP/1.1: 408",
    detail: "",
  },
  {
    situation: "payload or result over 64 KiB, progress over 4 KiB",
    code: Code.InvalidArgument,
    detail: "`ErrorInfo` `PAYLOAD_TOO_LARGE`",
  },
  {
    situation: "payload, result or progress nested more than 32 levels",
    code: Code.InvalidArgument,
    detail: "`google.rpc.BadRequest` with the field (`payload`, `jobs[3].payload`, `result`, `progress`)",
  },
  { situation: "request body over the limit (declared, read, or after decompression)", code: Code.ResourceExhausted, detail: "" },
  {
    situation: "unknown job id (to a token limited to queues, also a job of a queue not in its list), or a dependency that does not exist",
    code: Code.NotFound,
    detail: "`ErrorInfo` `JOB_NOT_FOUND` (for a dependency, metadata `field`: `depends_on[i]`)",
  },
  {
    situation: "DeleteSchedule of a name that names no schedule (to a token limited to queues, also a schedule of a queue not in its list)",
    code: Code.NotFound,
    detail: "`ErrorInfo` `SCHEDULE_NOT_FOUND` (metadata `name`)",
  },
  { situation: "wrong token, or job not running", code: Code.Aborted, detail: "`ErrorInfo` `LEASE_REJECTED`" },
  { situation: "right token, lease expired", code: Code.Aborted, detail: "`ErrorInfo` `LEASE_EXPIRED`" },
  {
    situation: "cancel of a job not QUEUED/WAITING/RETRY (nor RUNNING with `include_running`)",
    code: Code.FailedPrecondition,
    detail: "`ErrorInfo` `NOT_CANCELLABLE`",
  },
  { situation: "redrive of a job not DEAD", code: Code.FailedPrecondition, detail: "`ErrorInfo` `NOT_DEAD`" },
  {
    situation: "PurgeQueue whose `confirm` is not the queue name",
    code: Code.FailedPrecondition,
    detail: "`ErrorInfo` `PURGE_NOT_CONFIRMED` (metadata `field`, `queue`)",
  },
  { situation: "same idempotency key, different request", code: Code.AlreadyExists, detail: "`ErrorInfo` `IDEMPOTENCY_MISMATCH`" },
  {
    situation: "a job's dependencies name one job twice once refs and idempotency keys are resolved",
    code: Code.InvalidArgument,
    detail: "`ErrorInfo` `DEPENDENCY_REPEATED`",
  },
  { situation: "database busy past 5 s, disk full, server shutting down", code: Code.Unavailable, detail: "" },
  {
    situation: "WatchEvents resume before the oldest kept event, or from a sequence never issued",
    code: Code.OutOfRange,
    detail: "`ErrorInfo` `REPLAY_TOO_OLD` / `SEQUENCE_NOT_ISSUED`",
  },
  {
    situation: "WatchEvents subscriber too slow (dropped; resume from the sequence in the message)",
    code: Code.ResourceExhausted,
    detail: "`ErrorInfo` `SUBSCRIBER_TOO_SLOW`",
  },
  {
    situation: "WatchEvents when the server already serves `LEASEQUEUE_MAX_WATCHERS` streams",
    code: Code.ResourceExhausted,
    detail: "`ErrorInfo` `TOO_MANY_SUBSCRIBERS`",
  },
  {
    situation: "authentication on: no `Authorization: Bearer` token, a malformed header, or a token not in the auth file",
    code: Code.Unauthenticated,
    statusNote: "with `WWW-Authenticate: Bearer`",
    detail: "",
  },
  {
    situation:
      "authentication on: the token lacks the RPC's role, or a queue the request names (or that of the schedule a CreateSchedule would replace) is not in its list",
    code: Code.PermissionDenied,
    detail: "",
  },
];
