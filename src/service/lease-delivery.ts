/**
 * Whether a claimed lease can reach a worker, decided before it leaves the
 * handler.
 */
import { toBinary, type Message, type UnknownField } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { nestedTooDeepText } from "../domain/json-depth.js";
import type { Logger } from "../logger.js";
import type { ClaimedLease, Store } from "../store/store.js";
import { LeaseSchema, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { NestingTooDeep, type HandEncoders } from "./hand-wire.js";
import { BOUNDS, valueDepth } from "./validate.js";
import { leaseToWire } from "./wire.js";

/** The default receive limit of grpc-go, grpc-js and grpcio (4 MiB). */
const CLIENT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;

/**
 * Stored JSON up to this many characters (payload plus result, each at most
 * 64 KiB) cannot encode to more than 4 MiB: a JSON character becomes at most
 * about 6 bytes of google.protobuf.Value. Such leases skip the trial
 * encoding; their size is estimated from the JSON.
 */
const TRIAL_ENCODING_ABOVE_CHARS = 2 * BOUNDS.jsonBytes;

/**
 * A lease ready to send: a message for the library to serialize, or (with
 * hand encoders, for a binary client) its protobuf bytes as the entry of a
 * response's field 1; and its (estimated) encoded size.
 */
export interface WireLease {
  jobId: string;
  lease?: Lease;
  encoded?: UnknownField;
  bytes: number;
}

export type LeaseDelivery =
  | ({ deliverable: true } & WireLease)
  /** `problem` names the field and the reason, for the job's last_error. */
  | { deliverable: false; problem: string };

/**
 * The lease as a wire message (or, with `encoders`, bytes) every client can decode, or why it cannot be one.
 *
 * The server's own encoder never refuses a deep google.protobuf.Value; the
 * worker's decoder does (protobuf-es, C++ and upb stop at 100 nested
 * messages: inside a Lease, 48 JSON levels for protobuf-es, 32 levels of
 * objects for Python grpcio). Connect serializes a response after the handler
 * has returned (Claim) or yielded (StreamClaims), where a failure ends the
 * whole call and no one learns which lease caused it. So the handler checks
 * each lease against what a client's decoder takes (payload and result
 * readable from the database and nested at most 32 levels, the bound of
 * docs/api.md "Bounds"; the encoded lease within the 4 MiB that gRPC clients
 * receive by default) and keeps the ones that fail out of the response.
 * Encoding each lease once here also catches whatever else the encoder
 * refuses (an int32 out of range in a damaged row).
 *
 * Only a job that never passed this validation (stored by a release without
 * these bounds, or written to the database by other means) can fail:
 * validation refuses such payloads and results on Submit, SubmitBatch and
 * Complete.
 */
export function leaseForDelivery(claimed: ClaimedLease, encoders?: HandEncoders): LeaseDelivery {
  if (encoders !== undefined) return encodedForDelivery(claimed, encoders);
  let lease: Lease;
  try {
    lease = leaseToWire(claimed);
  } catch (err) {
    return {
      deliverable: false,
      problem: `job cannot be encoded for delivery to a worker: its stored payload or result cannot be read (${(err as Error).message})`,
    };
  }
  for (const [field, value] of [
    ["payload", lease.job?.payload],
    ["result", lease.job?.result],
    ["progress", lease.job?.progress],
  ] as const) {
    if (value !== undefined && tooDeep(value)) {
      return undeliverable(field, `it is ${nestedTooDeepText()}`);
    }
  }
  const jsonChars = claimed.job.payloadJson.length + (claimed.job.resultJson?.length ?? 0) + (claimed.job.progressJson?.length ?? 0);
  if (jsonChars <= TRIAL_ENCODING_ABOVE_CHARS) return { deliverable: true, jobId: claimed.job.id, lease, bytes: jsonChars + 512 };
  let bytes: number;
  try {
    bytes = toBinary(LeaseSchema, lease).byteLength;
  } catch (err) {
    return { deliverable: false, problem: `job cannot be encoded for delivery to a worker: ${(err as Error).message}` };
  }
  if (bytes > CLIENT_MAX_RECEIVE_BYTES) {
    return {
      deliverable: false,
      problem: `job cannot be encoded for delivery to a worker: the lease is ${bytes} bytes; gRPC clients receive at most ${CLIENT_MAX_RECEIVE_BYTES} by default`,
    };
  }
  return { deliverable: true, jobId: claimed.job.id, lease, bytes };
}

/**
 * The claimed leases a client can decode, as wire messages with their
 * (estimated) encoded size. A lease that cannot be encoded for a worker
 * would fail the whole response, and every retry would fail the same way
 * until its budget was spent by expiries; its job is dead-lettered at once
 * instead, with last_error saying why, so an operator sees it and nothing
 * waits for a lease nobody holds.
 */
export async function deliverableLeases(
  store: Store,
  log: Logger | undefined,
  leases: ClaimedLease[],
  encoders: HandEncoders | undefined,
): Promise<WireLease[]> {
  const wire: WireLease[] = [];
  for (const claimed of leases) {
    const delivery = leaseForDelivery(claimed, encoders);
    if (delivery.deliverable) {
      wire.push({ jobId: delivery.jobId, lease: delivery.lease, encoded: delivery.encoded, bytes: delivery.bytes });
      continue;
    }
    const { id: jobId, queue } = claimed.job;
    log?.error("lease cannot be encoded for a worker; job dead-lettered", { jobId, queue, problem: delivery.problem });
    try {
      await store.fail(jobId, claimed.leaseToken, { error: delivery.problem, permanent: true });
    } catch (err) {
      // The database is failing too: the lease expires instead, as any lease whose holder vanished.
      log?.warn("could not dead-letter an undeliverable job", { jobId, queue, error: err });
    }
  }
  return wire;
}

/** Binary clients: the encoder checks the nesting while it writes, and the size is exact. */
function encodedForDelivery(claimed: ClaimedLease, encoders: HandEncoders): LeaseDelivery {
  let encoded: Uint8Array;
  try {
    encoded = encoders.lease(claimed);
  } catch (err) {
    if (err instanceof NestingTooDeep) {
      return undeliverable(err.field, `it is ${nestedTooDeepText()}`);
    }
    if (err instanceof SyntaxError) {
      return {
        deliverable: false,
        problem: `job cannot be encoded for delivery to a worker: its stored payload or result cannot be read (${err.message})`,
      };
    }
    return { deliverable: false, problem: `job cannot be encoded for delivery to a worker: ${(err as Error).message}` };
  }
  if (encoded.length > CLIENT_MAX_RECEIVE_BYTES) {
    return {
      deliverable: false,
      problem: `job cannot be encoded for delivery to a worker: the lease is ${encoded.length} bytes; gRPC clients receive at most ${CLIENT_MAX_RECEIVE_BYTES} by default`,
    };
  }
  return { deliverable: true, jobId: claimed.job.id, encoded: encoders.field(1, encoded), bytes: encoded.length };
}

/**
 * Puts leases into a response's lease field (`leases` or `lease`, field 1 in
 * ClaimResponse, StreamClaimsResponse and WorkResponse): messages as
 * messages, encoded leases as the unknown field protobuf-es writes verbatim.
 */
export function withLeases<T extends Message & { $unknown?: UnknownField[] }>(
  response: T,
  leases: WireLease[],
  add: (lease: Lease) => void,
): T {
  for (const l of leases) {
    if (l.encoded !== undefined) (response.$unknown ??= []).push(l.encoded);
    else if (l.lease !== undefined) add(l.lease);
  }
  return response;
}

function tooDeep(value: Value): boolean {
  return valueDepth(value, BOUNDS.jsonDepth) > BOUNDS.jsonDepth;
}

function undeliverable(field: NestingTooDeep["field"], reason: string): LeaseDelivery {
  return { deliverable: false, problem: `${field} cannot be encoded for delivery to a worker: ${reason}` };
}
