import { createHash, timingSafeEqual } from "node:crypto";
import { pooledRandomBytes } from "./random-pool.js";

/**
 * Lease tokens prove ownership of a running job. They carry 256 random bits,
 * are returned once (in the Lease) and only their SHA-256 is stored, so a
 * copy of the database cannot be used to act on leases.
 */
export function newLeaseToken(): { token: string; hash: Buffer } {
  const token = pooledRandomBytes(32).toString("base64url");
  return { token, hash: hashLeaseToken(token) };
}

export function hashLeaseToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Constant-time comparison of a presented token against the stored hash. */
export function leaseTokenMatches(token: string, storedHash: Uint8Array | null): boolean {
  if (storedHash === null || storedHash.length !== 32) return false;
  return timingSafeEqual(hashLeaseToken(token), storedHash);
}
