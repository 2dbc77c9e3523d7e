import { v7 as uuidv7 } from "uuid";
import { pooledRandomBytes } from "./random-pool.js";

/**
 * The monotonic state of the ids issued by this process: the millisecond of
 * the last id and its 32-bit counter (seeded with 31 random bits). uuid's
 * own v7() keeps the same state, but only when it also draws its own 16
 * random bytes per id; given the pooled bytes it would leave ordering
 * within a millisecond to chance.
 */
let lastMs = -Infinity;
let seq = 0;

/** Job ids are UUIDv7: unique, and ordered by creation time (ListJobs sorts by id), strictly so within this process. */
export function newJobId(now = Date.now()): string {
  const random = pooledRandomBytes(16);
  if (now > lastMs) {
    // A new millisecond: the counter starts at a random 31-bit value (RFC 9562 method 1, as uuid's v7 does).
    seq = ((random[6] & 0x7f) << 24) | (random[7] << 16) | (random[8] << 8) | random[9];
    lastMs = now;
  } else {
    // The same millisecond (or the clock went back): count up; on overflow borrow the next millisecond.
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++;
  }
  return uuidv7({ random, msecs: lastMs, seq });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Any well-formed UUID (lower case, as we emit them); other ids are refused before the store is asked. */
export function isJobId(value: string): boolean {
  return UUID.test(value);
}
