/**
 * The one place where failures become wire errors (docs/api.md "Errors"):
 * every QueueError maps to its Connect code with a google.rpc.ErrorInfo
 * detail, and validation failures carry a google.rpc.BadRequest naming the
 * field. Anything else is a bug and becomes `internal` (and is logged).
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { QueueError, type QueueErrorReason } from "../domain/errors.js";

export const ERROR_DOMAIN = "leasequeue";

const CODE_OF: Record<QueueErrorReason, Code> = {
  JOB_NOT_FOUND: Code.NotFound,
  LEASE_REJECTED: Code.Aborted,
  LEASE_EXPIRED: Code.Aborted,
  NOT_CANCELLABLE: Code.FailedPrecondition,
  NOT_DEAD: Code.FailedPrecondition,
  IDEMPOTENCY_MISMATCH: Code.AlreadyExists,
  DEPENDENCY_REPEATED: Code.InvalidArgument,
  SCHEDULE_NOT_FOUND: Code.NotFound,
  STORE_UNAVAILABLE: Code.Unavailable,
  REPLAY_TOO_OLD: Code.OutOfRange,
  SEQUENCE_NOT_ISSUED: Code.OutOfRange,
  SUBSCRIBER_TOO_SLOW: Code.ResourceExhausted,
  TOO_MANY_SUBSCRIBERS: Code.ResourceExhausted,
};

/** Reasons that docs/api.md "Errors" does not list travel without an ErrorInfo. */
const UNLISTED: ReadonlySet<QueueErrorReason> = new Set(["STORE_UNAVAILABLE"]);

function errorInfo(reason: string, metadata: Record<string, string>) {
  return { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata }) };
}

/** invalid_argument naming the field (a proto field path such as `jobs[2].queue`). */
export function invalidArgument(field: string, description: string): ConnectError {
  return new ConnectError(`${field}: ${description}`, Code.InvalidArgument, undefined, [
    {
      desc: BadRequestSchema,
      value: create(BadRequestSchema, { fieldViolations: [{ field, description }] }),
    },
  ]);
}

export function payloadTooLarge(field: string, bytes: number, limit: number): ConnectError {
  const description = `is ${bytes} bytes of JSON; the limit is ${limit} bytes`;
  return new ConnectError(`${field}: ${description}`, Code.InvalidArgument, undefined, [
    errorInfo("PAYLOAD_TOO_LARGE", { field, bytes: String(bytes), limit: String(limit) }),
    {
      desc: BadRequestSchema,
      value: create(BadRequestSchema, { fieldViolations: [{ field, description }] }),
    },
  ]);
}

/**
 * PurgeQueue without its confirmation (docs/api.md "Queue controls"):
 * `confirm` must repeat the queue name, since a purge cannot be undone.
 */
export function purgeNotConfirmed(field: string, queue: string): ConnectError {
  return new ConnectError(
    `${field}: must equal the queue name "${queue}" to purge it; a purge cannot be undone`,
    Code.FailedPrecondition,
    undefined,
    [errorInfo("PURGE_NOT_CONFIRMED", { field, queue })],
  );
}

/** Translates anything a handler throws into the ConnectError the client sees. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof QueueError) {
    const details = UNLISTED.has(err.reason) ? [] : [errorInfo(err.reason, err.metadata)];
    return new ConnectError(err.message, CODE_OF[err.reason], undefined, details, err);
  }
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}
