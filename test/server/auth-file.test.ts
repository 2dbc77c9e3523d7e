/**
 * The auth file is checked strictly: every mistake refuses the whole file
 * with a message naming the place, and nothing of the file's text (which
 * might hold a token pasted by mistake) is quoted back.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AuthFileError, parseAuthFile, readAuthFile } from "../../src/server/auth-file.js";

const HASH_A = "a".repeat(64);
const HASH_B = "b".repeat(64);

function file(tokens: unknown, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ tokens, ...extra });
}

describe("the auth file", () => {
  it("reads names, hashes, roles and optional queue lists", () => {
    const entries = parseAuthFile(
      file([
        { name: "billing-api", sha256: HASH_A, roles: ["producer"], queues: ["billing", "billing.eu"] },
        { name: "ops@example.com", sha256: HASH_B, roles: ["operator", "reader"] },
      ]),
    );
    expect(entries).toEqual([
      { name: "billing-api", sha256: HASH_A, roles: ["producer"], queues: ["billing", "billing.eu"] },
      { name: "ops@example.com", sha256: HASH_B, roles: ["operator", "reader"] },
    ]);
  });

  it.each([
    ["not JSON", "{tokens: []}", /is not valid JSON \(line 1, column 2\)/],
    ["not an object", "[]", /the file must be a JSON object/],
    [
      "an unknown top-level key",
      file([{ name: "a", sha256: HASH_A, roles: ["reader"] }], { token: [] }),
      /the file has an unknown key "token"/,
    ],
    ["no tokens list", "{}", /"tokens" must be a list of tokens/],
    ["an empty tokens list", file([]), /lists no token/],
    ["an entry that is not an object", file(["abc"]), /tokens\[0\] must be a JSON object/],
    [
      "a misspelt key (queue for queues)",
      file([{ name: "a", sha256: HASH_A, roles: ["reader"], queue: ["x"] }]),
      /tokens\[0\] has an unknown key "queue"/,
    ],
    ["a missing name", file([{ sha256: HASH_A, roles: ["reader"] }]), /tokens\[0\]\.name must be/],
    ["a name with a space", file([{ name: "a b", sha256: HASH_A, roles: ["reader"] }]), /tokens\[0\]\.name must be/],
    [
      "an upper-case hash",
      file([{ name: "a", sha256: HASH_A.toUpperCase(), roles: ["reader"] }]),
      /tokens\[0\]\.sha256 must be 64 lowercase/,
    ],
    ["a short hash", file([{ name: "a", sha256: "abc", roles: ["reader"] }]), /tokens\[0\]\.sha256/],
    ["no roles", file([{ name: "a", sha256: HASH_A, roles: [] }]), /tokens\[0\]\.roles must be a non-empty list/],
    [
      "an unknown role",
      file([{ name: "a", sha256: HASH_A, roles: ["reader", "admin"] }]),
      /tokens\[0\]\.roles\[1\] must be one of producer, worker, operator, reader/,
    ],
    ["a role twice", file([{ name: "a", sha256: HASH_A, roles: ["reader", "reader"] }]), /tokens\[0\]\.roles lists an item twice/],
    [
      "an empty queue list",
      file([{ name: "a", sha256: HASH_A, roles: ["reader"], queues: [] }]),
      /tokens\[0\]\.queues must be a non-empty list/,
    ],
    [
      "a bad queue name",
      file([{ name: "a", sha256: HASH_A, roles: ["reader"], queues: ["no spaces"] }]),
      /tokens\[0\]\.queues\[0\] must be a queue name/,
    ],
    [
      "two tokens with one name",
      file([
        { name: "a", sha256: HASH_A, roles: ["reader"] },
        { name: "a", sha256: HASH_B, roles: ["worker"] },
      ]),
      /tokens\[1\]\.name is the same as tokens\[0\]\.name/,
    ],
    [
      "two entries with one hash",
      file([
        { name: "a", sha256: HASH_A, roles: ["reader"] },
        { name: "b", sha256: HASH_A, roles: ["worker"] },
      ]),
      /tokens\[1\]\.sha256 is the same as tokens\[0\]\.sha256/,
    ],
  ])("refuses %s", (_what, text, message) => {
    expect(() => parseAuthFile(text)).toThrow(AuthFileError);
    expect(() => parseAuthFile(text)).toThrow(message);
  });

  it("never quotes the file's text in its error", () => {
    const pasted = "lq_" + "s".repeat(43);
    let message = "";
    try {
      parseAuthFile(`{"tokens": [${pasted}]}`);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/is not valid JSON/);
    expect(message).not.toContain("sss");
  });

  it("names the file when it cannot be read or is wrong", () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-auth-file-"));
    try {
      expect(() => readAuthFile(join(dir, "missing.json"))).toThrow(/cannot read the auth file .*missing\.json: ENOENT/);
      const path = join(dir, "auth.json");
      writeFileSync(path, file([]));
      expect(() => readAuthFile(path)).toThrow(`auth file ${path}: "tokens" lists no token`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
