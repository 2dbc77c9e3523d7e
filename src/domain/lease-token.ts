import { createHash, randomFillSync, timingSafeEqual } from "node:crypto";

/**
 * Lease tokens prove ownership of a running job. They carry 256 random bits,
 * are returned once (in the Lease) and only their SHA-256 is stored, so a
 * copy of the database cannot be used to act on leases.
 */
export function newLeaseToken(): { token: string; hash: Buffer } {
  const token = nextRandom32().toString("base64url");
  return { token, hash: hashLeaseToken(token) };
}

/**
 * Random bytes drawn from the CSPRNG 4 KiB at a time: a claim of 100 jobs
 * then costs one call into OpenSSL instead of a hundred. Each 32-byte slice
 * is handed out once.
 */
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

function nextRandom32(): Buffer {
  if (poolOffset + 32 > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const slice = POOL.subarray(poolOffset, poolOffset + 32);
  poolOffset += 32;
  return slice;
}

export function hashLeaseToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Constant-time comparison of a presented token against the stored hash. */
export function leaseTokenMatches(token: string, storedHash: Uint8Array | null): boolean {
  if (storedHash === null || storedHash.length !== 32) return false;
  return timingSafeEqual(hashLeaseToken(token), storedHash);
}
