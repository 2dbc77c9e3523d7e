/**
 * Bearer tokens of the auth file: how they are made, how they are stored,
 * and how a presented one is found.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** RFC 6750 §2.1 b64token: what may follow `Bearer ` in an Authorization header. */
export const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Shortest token `hash-token` accepts from its caller (generated ones are 46 characters). */
export const MIN_TOKEN_CHARS = 32;

/** Prefix of generated tokens, so that a leaked one is recognisable (secret scanners, logs). */
const GENERATED_PREFIX = "lq_";

/** A new token: "lq_" and 256 random bits in base64url. */
export function generateToken(): string {
  return GENERATED_PREFIX + randomBytes(32).toString("base64url");
}

/**
 * SHA-256 of a token, as the 64 lowercase hex digits the auth file stores.
 *
 * The file stores SHA-256 of each token, never the token. A fast hash is
 * enough because the tokens are not passwords: `leasequeue hash-token`
 * makes them from 256 random bits (and refuses a token of its caller that
 * is shorter than 32 characters), so nobody can search for a preimage of a
 * stored hash, and a slow hash (scrypt, bcrypt) would only cost every call
 * milliseconds of CPU. What a slow hash protects, guessable secrets, is not
 * accepted here.
 */
export function hashToken(token: string): string {
  return sha256(token).toString("hex");
}

function sha256(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** A set of stored hashes and what each stands for. */
export class TokenTable<T> {
  readonly #entries: ReadonlyArray<{ hash: Buffer; value: T }>;

  /** @param entries each with the hex SHA-256 of its token */
  constructor(entries: ReadonlyArray<{ sha256: string; value: T }>) {
    this.#entries = entries.map((e) => ({ hash: Buffer.from(e.sha256, "hex"), value: e.value }));
  }

  get size(): number {
    return this.#entries.length;
  }

  /**
   * What `token` stands for, or undefined for a token that is not in the table.
   *
   * A presented token is hashed and compared with every stored hash with
   * crypto.timingSafeEqual, without stopping at a match, so the time a lookup
   * takes says nothing about which stored hash, or how much of one, matched.
   */
  lookup(token: string): T | undefined {
    const presented = sha256(token);
    let found: T | undefined;
    for (const entry of this.#entries) {
      // Every entry is compared, whether or not one matched already.
      if (timingSafeEqual(presented, entry.hash) && found === undefined) found = entry.value;
    }
    return found;
  }
}
