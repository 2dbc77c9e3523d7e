import { randomFillSync } from "node:crypto";

/**
 * Random bytes drawn from the CSPRNG 4 KiB at a time and handed out in
 * slices, each once: a batch of 100 jobs (ids) or leases (tokens) then costs
 * one call into OpenSSL instead of a hundred, and a call per id or token is a
 * visible share of the server's time on the batched path. A slice is valid
 * until the next call: read it at once.
 */
const POOL = Buffer.alloc(4096);
let offset = POOL.length;

export function pooledRandomBytes(n: number): Buffer {
  if (n > POOL.length) throw new RangeError(`at most ${POOL.length} pooled random bytes at a time, not ${n}`);
  if (offset + n > POOL.length) {
    randomFillSync(POOL);
    offset = 0;
  }
  const slice = POOL.subarray(offset, offset + n);
  offset += n;
  return slice;
}
