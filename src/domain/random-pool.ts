import { randomFillSync } from "node:crypto";

/**
 * Random bytes drawn from the CSPRNG 4 KiB at a time and handed out in
 * slices, each once: a batch of 100 jobs (ids) or leases (tokens) then
 * costs one call into OpenSSL instead of a hundred (on this machine a
 * 16-byte getRandomValues call was about 2% of the server's time in a
 * batched run). A slice is valid until the next call: read it at once.
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
