/**
 * The auth file (LEASEQUEUE_AUTH_FILE): JSON, one object with a `tokens`
 * list; each token has a `name` (for logs and error messages; never secret),
 * the `sha256` of the token (bearer-tokens.ts), its `roles` (rpc-roles.ts)
 * and, optionally, the only `queues` it may touch.
 */
import { readFileSync } from "node:fs";
import { BOUNDS } from "../domain/request-bounds.js";
import { isRole, ROLES, type Role } from "../service/rpc-roles.js";

/**
 * One entry of the `tokens` list; a file with two:
 *
 *     {
 *       "tokens": [
 *         { "name": "billing-api", "sha256": "9c1f…(64 hex)", "roles": ["producer"], "queues": ["billing"] },
 *         { "name": "ops-console", "sha256": "4be0…(64 hex)", "roles": ["operator", "reader"] }
 *       ]
 *     }
 */
export interface TokenEntry {
  name: string;
  /** 64 lowercase hex digits. */
  sha256: string;
  roles: Role[];
  /** Undefined: every queue. */
  queues?: string[];
}

export class AuthFileError extends Error {
  override name = "AuthFileError";
}

/** A token's name: what logs and errors call it. */
export const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const FILE_KEYS = ["tokens"];
const ENTRY_KEYS = ["name", "sha256", "roles", "queues"];

/** Reads and checks the file; throws AuthFileError naming the file and the problem. */
export function readAuthFile(path: string): TokenEntry[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new AuthFileError(`cannot read the auth file ${path}: ${(err as Error).message}`);
  }
  try {
    return parseAuthFile(text);
  } catch (err) {
    if (err instanceof AuthFileError) throw new AuthFileError(`auth file ${path}: ${err.message}`);
    throw err;
  }
}

/**
 * Parses the file's text; throws AuthFileError naming the problem.
 *
 * `leasequeue hash-token` prints an entry. The file is checked strictly, and
 * a mistake refuses the whole file with a message naming the place: an
 * unknown key (`"queue"` for `"queues"`) would otherwise silently widen
 * what a token may do.
 */
export function parseAuthFile(text: string): TokenEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    // Only the position: the parser's message may quote the file's text.
    const at = /position (\d+)/.exec((err as Error).message);
    throw new AuthFileError(`is not valid JSON${at ? ` (${lineAndColumn(text, Number(at[1]))})` : ""}`);
  }
  const file = object(parsed, "the file", FILE_KEYS);
  if (!Array.isArray(file.tokens)) throw new AuthFileError(`"tokens" must be a list of tokens`);
  if (file.tokens.length === 0) throw new AuthFileError(`"tokens" lists no token: nobody could call the API`);
  const entries = file.tokens.map((raw, i) => entry(raw, `tokens[${i}]`));
  unique(
    entries.map((e) => e.name),
    "name",
    entries,
  );
  unique(
    entries.map((e) => e.sha256),
    "sha256",
    entries,
  );
  return entries;
}

function entry(raw: unknown, path: string): TokenEntry {
  const e = object(raw, path, ENTRY_KEYS);
  if (typeof e.name !== "string" || !TOKEN_NAME.test(e.name)) {
    throw new AuthFileError(`${path}.name must be 1-64 characters of [A-Za-z0-9._:@-], starting with a letter or digit`);
  }
  if (typeof e.sha256 !== "string" || !SHA256_HEX.test(e.sha256)) {
    throw new AuthFileError(`${path}.sha256 must be 64 lowercase hexadecimal digits (leasequeue hash-token prints it)`);
  }
  const roles = list(e.roles, `${path}.roles`, (r, at) => {
    if (!isRole(r)) throw new AuthFileError(`${at} must be one of ${ROLES.join(", ")}`);
    return r;
  });
  const result: TokenEntry = { name: e.name, sha256: e.sha256, roles };
  if (e.queues !== undefined) {
    result.queues = list(e.queues, `${path}.queues`, (q, at) => {
      if (typeof q !== "string" || !BOUNDS.name.test(q)) throw new AuthFileError(`${at} must be a queue name`);
      return q;
    });
  }
  return result;
}

function object(raw: unknown, path: string, keys: readonly string[]): Record<string, unknown> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new AuthFileError(`${path} must be a JSON object`);
  for (const key of Object.keys(raw)) {
    if (!keys.includes(key)) throw new AuthFileError(`${path} has an unknown key "${key}" (known: ${keys.join(", ")})`);
  }
  return raw as Record<string, unknown>;
}

function list<T>(raw: unknown, path: string, item: (value: unknown, at: string) => T): T[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new AuthFileError(`${path} must be a non-empty list`);
  const items = raw.map((value, i) => item(value, `${path}[${i}]`));
  if (new Set(items).size !== items.length) throw new AuthFileError(`${path} lists an item twice`);
  return items;
}

function unique(values: string[], key: string, entries: TokenEntry[]): void {
  const seen = new Map<string, number>();
  values.forEach((value, i) => {
    const first = seen.get(value);
    if (first !== undefined) {
      throw new AuthFileError(`tokens[${i}].${key} is the same as tokens[${first}].${key} ("${entries[first].name}")`);
    }
    seen.set(value, i);
  });
}

function lineAndColumn(text: string, position: number): string {
  const before = text.slice(0, position).split("\n");
  return `line ${before.length}, column ${before.at(-1)!.length + 1}`;
}
