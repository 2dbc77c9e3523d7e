/** Auth files for tests: tokens made as `leasequeue hash-token` makes them. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateToken, hashToken } from "../../src/server/bearer-tokens.js";
import type { Role } from "../../src/service/rpc-roles.js";

export interface TestToken {
  name: string;
  roles: Role[];
  queues?: string[];
}

/** Writes `dir/name` with a fresh token for each entry; returns the path and each token by name. */
export function writeAuthFile(dir: string, entries: TestToken[], name = "auth.json"): { path: string; tokens: Record<string, string> } {
  const tokens: Record<string, string> = {};
  const file = {
    tokens: entries.map((e) => {
      const token = generateToken();
      tokens[e.name] = token;
      return { name: e.name, sha256: hashToken(token), roles: e.roles, ...(e.queues ? { queues: e.queues } : {}) };
    }),
  };
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(file, null, 2));
  return { path, tokens };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
