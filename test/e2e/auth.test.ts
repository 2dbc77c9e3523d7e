/**
 * Authentication as an operator meets it, on the real `leasequeue` command:
 * `hash-token` makes entries (a new token, or one from stdin, never from the
 * command line), a server started with a bad auth file refuses to start and
 * says why, SIGHUP rereads the file (a bad file keeps the tokens in force),
 * and no token, header or token hash ever reaches a log line.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { callJson, runCli, spawnServer, type SpawnedServer } from "../helpers/process.js";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-auth-e2e-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The token and entry of `hash-token` without --token-stdin: comment, token, comment, entry. */
function parseGenerated(stdout: string): { token: string; entry: any } {
  const lines = stdout.trimEnd().split("\n");
  expect(lines).toHaveLength(4);
  expect(lines[0]).toMatch(/^# token for ".*": give it to the client; it is shown only now and stored nowhere$/);
  expect(lines[2]).toMatch(/^# its entry for the "tokens" list of LEASEQUEUE_AUTH_FILE$/);
  return { token: lines[1], entry: JSON.parse(lines[3]) };
}

describe("leasequeue hash-token", () => {
  it("makes a new random token and its entry", async () => {
    const run = await runCli(["hash-token", "--name", "billing-api", "--roles", "producer,reader", "--queues", "billing,billing.eu"]);
    expect(run.code, run.stderr).toBe(0);
    const { token, entry } = parseGenerated(run.stdout);
    expect(token).toMatch(/^lq_[A-Za-z0-9_-]{43}$/);
    expect(entry).toEqual({ name: "billing-api", sha256: sha256(token), roles: ["producer", "reader"], queues: ["billing", "billing.eu"] });
    const again = parseGenerated((await runCli(["hash-token", "--name", "b", "--roles", "worker"])).stdout);
    expect(again.token).not.toBe(token);
    expect(again.entry).toEqual({ name: "b", sha256: sha256(again.token), roles: ["worker"] });
  });

  it("reads a token from stdin with --token-stdin and prints only the entry", async () => {
    const token = "k".repeat(20) + "Q".repeat(20);
    const run = await runCli(["hash-token", "--name", "ci", "--roles", "worker", "--token-stdin"], {}, `${token}\n`);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`${JSON.stringify({ name: "ci", sha256: sha256(token), roles: ["worker"] })}\n`);
    expect(run.stdout).not.toContain(token);
  });

  it.each([
    [["--roles", "worker"], /--name is required/],
    [["--name", "x"], /--roles is required/],
    [["--name", "x", "--roles", "admin"], /--roles: "admin" is not a role; use producer, worker, operator, reader/],
    [["--name", "x", "--roles", "reader", "--queues", "no spaces"], /--queues: "no spaces" is not a queue name/],
    [["--name", "x", "--roles", "reader", "--token", "lq_secretsecretsecretsecretsecretsecret"], /Unknown option '--token'/],
    [
      ["--name", "x", "--roles", "reader", "lq_secretsecretsecretsecretsecretsecret"],
      /takes no arguments; a token is read with --token-stdin/,
    ],
  ])("refuses %j", async (args, message) => {
    const run = await runCli(["hash-token", ...args]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toContain("lq_secret");
  });

  it.each([
    ["an empty stdin", "", /standard input was empty/],
    ["a short token", "abc\n", /the token has 3 characters; use at least 32/],
    ["a token that cannot be a Bearer token", "has spaces in it and is long enough to pass\n", /a token is one line of/],
  ])("refuses %s with --token-stdin", async (_what, input, message) => {
    const run = await runCli(["hash-token", "--name", "x", "--roles", "reader", "--token-stdin"], {}, input);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
  });
});

describe("the auth file of a running server", () => {
  it("refuses to start with a bad auth file, saying what is wrong", async () => {
    const path = join(dir, "bad.json");
    writeFileSync(path, JSON.stringify({ tokens: [{ name: "x", sha256: "a".repeat(64), roles: ["reader"], queue: ["billing"] }] }));
    const run = await runCli(["serve", "--db", join(dir, "never.db"), "--port", "0", "--metrics-port", "0", "--auth-file", path]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `leasequeue: not starting: auth file ${path}: tokens[0] has an unknown key "queue" (known: name, sha256, roles, queues)\n`,
    );
    expect(run.stdout).not.toMatch(/listening/);
    const missing = await runCli(["--db", join(dir, "never.db"), "--port", "0", "--metrics-port", "0"], {
      LEASEQUEUE_AUTH_FILE: join(dir, "nope.json"),
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^leasequeue: not starting: cannot read the auth file .*nope\.json: ENOENT/);
  });

  describe("on SIGHUP", () => {
    let server: SpawnedServer;
    const path = () => join(dir, "reload.json");
    beforeAll(async () => {
      const made = await runCli(["hash-token", "--name", "first", "--roles", "reader"]);
      const first = parseGenerated(made.stdout);
      writeFileSync(path(), JSON.stringify({ tokens: [first.entry] }));
      server = await spawnServer(join(dir, "reload.db"), ["--auth-file", path(), "--log-level", "debug"]);
      tokens.first = first.token;
    }, 60_000);
    afterAll(async () => {
      await server?.stop();
    });
    const tokens: Record<string, string> = {};
    const stats = (token?: string) => callJson(server.apiUrl, "GetStats", {}, token === undefined ? {} : bearer(token));
    /** Sends SIGHUP and waits for the n-th log line with that message. */
    const hangUp = async (msg: string, nth: number) => {
      server.child.kill("SIGHUP");
      await server.waitForLine((_l, j) => j?.msg === msg && server.lines.filter((l) => l.includes(`"msg":"${msg}"`)).length >= nth);
    };

    it("logs that authentication is on, with the number of tokens", () => {
      const on = server.lines.map((l) => JSON.parse(l)).find((j) => j.msg === "authentication on");
      expect(on).toMatchObject({ authFile: path(), tokens: 1 });
      expect(server.lines.map((l) => JSON.parse(l)).find((j) => j.msg === "api listening")).toMatchObject({ authentication: true });
    });

    it("replaces the tokens with a valid file, keeps them with a bad one, and keeps serving", async () => {
      expect((await stats(tokens.first)).status).toBe(200);
      const file = writeAuthFile(
        dir,
        [
          { name: "second", roles: ["reader"] },
          { name: "third", roles: ["producer"] },
        ],
        "reload.json",
      );
      await hangUp("auth file reloaded", 1);
      expect(JSON.parse(server.lines.find((l) => l.includes('"msg":"auth file reloaded"'))!)).toMatchObject({ path: path(), tokens: 2 });
      expect((await stats(tokens.first)).status).toBe(401);
      expect((await stats(file.tokens.second)).status).toBe(200);
      expect((await stats(file.tokens.third)).status).toBe(403);

      for (const [bad, why] of [
        ["{not json", "is not valid JSON (line 1, column 2)"],
        [JSON.stringify({ tokens: [] }), '"tokens" lists no token: nobody could call the API'],
      ] as const) {
        writeFileSync(path(), bad);
        const failuresBefore = server.lines.filter((l) => l.includes("auth file reload failed")).length;
        await hangUp("auth file reload failed; the tokens in force stay", failuresBefore + 1);
        const failure = JSON.parse(server.lines.filter((l) => l.includes("auth file reload failed")).at(-1)!);
        expect(failure).toMatchObject({ level: "error", path: path(), tokens: 2, error: `auth file ${path()}: ${why}` });
        expect((await stats(file.tokens.second)).status).toBe(200);
        expect((await stats(tokens.first)).status).toBe(401);
      }
      expect(server.child.exitCode).toBeNull();
    });
  });
});

describe("secrecy", () => {
  it("never logs a token, a token's hash or the Authorization header, whatever the call", { timeout: 60_000 }, async () => {
    const file = writeAuthFile(
      dir,
      [
        { name: "all", roles: ["producer", "worker", "operator", "reader"] },
        { name: "reader-billing", roles: ["reader"], queues: ["billing"] },
      ],
      "secrets.json",
    );
    const server = await spawnServer(join(dir, "secrets.db"), ["--auth-file", file.path, "--log-level", "debug"]);
    const unknown = "lq_" + "u".repeat(43);
    const secrets = [...Object.values(file.tokens), unknown];
    try {
      const all = bearer(file.tokens.all);
      const submitted = await callJson(server.apiUrl, "Submit", { queue: "billing", task: "t" }, all);
      expect(submitted.status).toBe(200);
      const calls: Array<[string, unknown, Record<string, string>]> = [
        ["GetStats", {}, {}],
        ["GetStats", {}, bearer(unknown)],
        ["GetStats", {}, { authorization: `Bearer ${unknown} trailing` }],
        ["GetStats", {}, { authorization: `Token ${file.tokens.all}` }],
        ["Redrive", { jobId: submitted.body.job.id }, bearer(file.tokens["reader-billing"])],
        ["Submit", { queue: "other", task: "t" }, bearer(file.tokens["reader-billing"])],
        ["GetJob", { jobId: submitted.body.job.id }, bearer(file.tokens["reader-billing"])],
        ["ListJobs", {}, bearer(file.tokens["reader-billing"])],
        ["Claim", { queue: "billing", workerId: "w" }, all],
        ["Heartbeat", { jobId: submitted.body.job.id, leaseToken: "wrong" }, all],
        ["GetJob", { jobId: "not-a-uuid" }, all],
      ];
      for (const [method, body, headers] of calls) await callJson(server.apiUrl, method, body, headers);
      // A stream refused and one served, over Connect.
      for (const token of [unknown, file.tokens.all]) {
        const client = createClient(LeaseQueueService, createConnectTransport({ baseUrl: server.apiUrl, httpVersion: "1.1" }));
        const abort = new AbortController();
        try {
          for await (const _ of client.watchEvents({}, { headers: bearer(token), signal: abort.signal })) abort.abort();
        } catch {
          // refused, or aborted by us
        }
      }
      server.child.kill("SIGHUP");
      await server.waitForLine((_l, j) => j?.msg === "auth file reloaded");
    } finally {
      await server.stop();
    }
    const output = [...server.lines, ...server.stderrLines].join("\n");
    expect(output).toMatch(/call refused before its handler/); // debug lines were written
    for (const secret of secrets) {
      expect(output).not.toContain(secret);
      expect(output).not.toContain(sha256(secret));
    }
    expect(output.toLowerCase()).not.toContain("bearer lq_");
  });
});
