/**
 * Whether a claimed lease can reach a worker, decided before it leaves the
 * handler.
 *
 * The server's own encoder never refuses a deep google.protobuf.Value; the
 * worker's decoder does (protobuf-es, C++ and upb stop at 100 nested
 * messages, about 48 JSON levels inside a Lease). Connect serializes a
 * response after the handler has returned (Claim) or yielded (StreamClaims),
 * where a failure ends the whole call and no one learns which lease caused
 * it. So the handler checks each lease against what api.md promises clients
 * (payload and result within 64 KiB and 32 levels, readable from the
 * database) and keeps the ones that fail out of the response. It also
 * encodes each lease once, so whatever else the encoder refuses (an int32
 * out of range in a damaged row) is caught per lease too; that costs about
 * 0.2 ms for a lease near 64 KiB.
 *
 * Only a job written before those bounds were enforced (or written to the
 * database by other means) can fail: validation refuses such payloads and
 * results on Submit, SubmitBatch and Complete.
 */
import { toBinary } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import type { ClaimedLease } from "../store/store.js";
import { LeaseSchema, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { BOUNDS, valueDepth } from "./validate.js";
import { leaseToWire } from "./wire.js";

export type LeaseDelivery =
  | { deliverable: true; lease: Lease }
  /** `problem` names the field and the reason, for the job's last_error. */
  | { deliverable: false; problem: string };

/** The lease as a wire message every client can decode, or why it cannot be one. */
export function leaseForDelivery(claimed: ClaimedLease): LeaseDelivery {
  const { job } = claimed;
  for (const [field, text] of [["payload", job.payloadJson], ["result", job.resultJson]] as const) {
    if (text === null) continue;
    const bytes = Buffer.byteLength(text, "utf8");
    if (bytes > BOUNDS.jsonBytes) return undeliverable(field, `it is ${bytes} bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes`);
  }
  let lease: Lease;
  try {
    lease = leaseToWire(claimed);
  } catch (err) {
    return undeliverable("payload", `the stored JSON cannot be read (${(err as Error).message})`);
  }
  for (const [field, value] of [["payload", lease.job?.payload], ["result", lease.job?.result]] as const) {
    if (value !== undefined && tooDeep(value)) {
      return undeliverable(field, `it is nested more than ${BOUNDS.jsonDepth} levels deep; the limit is ${BOUNDS.jsonDepth} levels`);
    }
  }
  try {
    toBinary(LeaseSchema, lease);
  } catch (err) {
    return { deliverable: false, problem: `job cannot be encoded for delivery to a worker: ${(err as Error).message}` };
  }
  return { deliverable: true, lease };
}

function tooDeep(value: Value): boolean {
  return valueDepth(value, BOUNDS.jsonDepth) > BOUNDS.jsonDepth;
}

function undeliverable(field: "payload" | "result", reason: string): LeaseDelivery {
  return { deliverable: false, problem: `${field} cannot be encoded for delivery to a worker: ${reason}` };
}
