/**
 * Lease tokens and idempotency keys are secrets (docs/api.md "Lease tokens":
 * "a Job never carries a lease token or an idempotency key"; SECURITY.md
 * "The trust boundary": logs never contain them). A real server process at debug log level goes through every path
 * that takes or hands out one: keys as the field, the header and in a
 * batch, a replay and a mismatch; tokens from Claim and StreamClaims, used
 * for Heartbeat, Complete, Fail and Release, misused on the wrong job, after
 * expiry, and guessed; a job whose lease cannot be delivered. Then nothing
 * else the server shows may contain any of them (nor the SHA-256 it stores
 * of a token): GetJob, ListJobs, ListJobEvents, GetStats, every error
 * answer, a WatchEvents stream that ran throughout, /metrics, every log line
 * and the console's HTML and scripts. Only the Claim and StreamClaims
 * answers themselves carry tokens.
 */
import Database from "better-sqlite3";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LeaseQueueService, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { callJson, listAllJobs, okJson, spawnServer, type SpawnedServer } from "../helpers/process.js";

/** Connect JSON, so the stream's messages are text like everything else here. */
function streamClient() {
  return createClient(LeaseQueueService, createConnectTransport({ baseUrl: server.apiUrl, httpVersion: "1.1", useBinaryFormat: false }));
}

let dir: string;
let server: SpawnedServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-secrets-"));
  server = await spawnServer(join(dir, "jobs.db"), ["--log-level", "debug"]);
}, 60_000);

afterAll(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One statement on the server's database through a second connection, as an operator's tool would. */
function writeBehindTheServer(sql: string, ...params: unknown[]): void {
  const db = new Database(join(dir, "jobs.db"));
  try {
    db.prepare(sql).run(...params);
  } finally {
    db.close();
  }
}

/** A Connect JSON server stream read as raw text until `signal` aborts. */
function rawStream(method: string, body: unknown, signal: AbortSignal): { text: () => string; done: Promise<void> } {
  let text = "";
  const json = Buffer.from(JSON.stringify(body));
  const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), json]);
  envelope.writeUInt32BE(json.length, 1);
  const done = (async () => {
    try {
      const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
        method: "POST",
        headers: { "content-type": "application/connect+json", "connect-protocol-version": "1" },
        body: envelope,
        signal,
      });
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
    } catch (err) {
      if (!signal.aborted) throw err;
    }
  })();
  return { text: () => text, done };
}

it("no lease token or idempotency key shows anywhere but the lease itself", { timeout: 60_000 }, async () => {
  const api = server.apiUrl;
  const secret = (what: string) => `${what}-${randomBytes(12).toString("base64url")}`;
  const keys: string[] = [];
  const tokens: string[] = [];
  /** Everything the server showed that must be free of secrets. */
  const shown: string[] = [];
  const call = async (method: string, body: unknown, headers?: Record<string, string>) => {
    const reply = await callJson(api, method, body, headers);
    shown.push(JSON.stringify(reply.body));
    return reply;
  };
  /** A call whose answer legitimately carries tokens: only the tokens are collected. */
  const leasesFrom = (leases: any[]) => {
    for (const l of leases) tokens.push(l.leaseToken);
    return leases;
  };

  const watch = new AbortController();
  const events = rawStream("WatchEvents", {}, watch.signal);
  const streamAbort = new AbortController();

  // Keys: as the field, as the header, in a batch; then a replay and a mismatch.
  const fieldKey = secret("field-key");
  const headerKey = secret("header-key");
  const batchKeys = [secret("batch-key"), secret("batch-key")];
  keys.push(fieldKey, headerKey, ...batchKeys);
  expect((await call("Submit", { queue: "secrets", task: "t", payload: { n: 1 }, idempotencyKey: fieldKey })).status).toBe(200);
  expect((await call("Submit", { queue: "secrets", task: "t", payload: { n: 2 } }, { "Idempotency-Key": headerKey })).status).toBe(200);
  expect(
    (await call("SubmitBatch", { jobs: batchKeys.map((k, i) => ({ queue: "secrets", task: "t", payload: { b: i }, idempotencyKey: k })) }))
      .status,
  ).toBe(200);
  expect((await call("Submit", { queue: "secrets", task: "t", payload: { n: 1 }, idempotencyKey: fieldKey })).body.deduplicated).toBe(true);
  expect((await call("Submit", { queue: "secrets", task: "t", payload: { n: 99 }, idempotencyKey: fieldKey })).status).toBe(409);
  expect((await call("Submit", { queue: "secrets", task: "t", idempotencyKey: fieldKey }, { "Idempotency-Key": headerKey })).status).toBe(
    400,
  );
  const badKey = secret("bad key with spaces");
  keys.push(badKey);
  expect((await call("Submit", { queue: "secrets", task: "t", idempotencyKey: badKey })).status).toBe(400);

  // Tokens: a unary Claim of two, a StreamClaims lease; every acknowledgement, right and wrong.
  const claimed = leasesFrom((await okJson(api, "Claim", { queue: "secrets", workerId: "secret-worker", maxJobs: 2 })).leases);
  expect(claimed).toHaveLength(2);
  const streamed: Lease[] = [];
  for await (const m of streamClient().streamClaims(
    { queue: "secrets", workerId: "secret-streamer", maxInFlight: 2 },
    { signal: streamAbort.signal },
  )) {
    if (m.lease !== undefined) streamed.push(m.lease);
    if (streamed.length === 2) break;
  }
  streamAbort.abort();
  const streamTokens = streamed.map((l) => l.leaseToken);
  tokens.push(...streamTokens);
  const [a, b] = claimed;
  const guessed = secret("guessed-token");
  tokens.push(guessed);
  expect((await call("Heartbeat", { jobId: a.job.id, leaseToken: a.leaseToken, leaseDuration: "30s" })).status).toBe(200);
  expect((await call("Heartbeat", { jobId: a.job.id, leaseToken: guessed })).status).toBe(409);
  expect((await call("Complete", { jobId: b.job.id, leaseToken: a.leaseToken })).status).toBe(409); // a's token on b
  expect((await call("Fail", { jobId: a.job.id, leaseToken: b.leaseToken, error: "nope" })).status).toBe(409);
  expect((await call("Release", { jobId: a.job.id, leaseToken: "x".repeat(300) })).status).toBe(400);
  expect((await call("Complete", { jobId: a.job.id, leaseToken: a.leaseToken, result: { ok: true } })).status).toBe(200);
  expect((await call("Complete", { jobId: a.job.id, leaseToken: a.leaseToken })).status).toBe(409); // already done
  expect((await call("Fail", { jobId: b.job.id, leaseToken: b.leaseToken, error: "failing on purpose", permanent: true })).status).toBe(
    200,
  );
  const streamedIds = streamed.map((l) => l.job!.id);
  expect((await call("Release", { jobId: streamedIds[0], leaseToken: streamTokens[0] })).status).toBe(200);
  expect((await call("Complete", { jobId: streamedIds[1], leaseToken: streamTokens[1] })).status).toBe(200);
  // An expired lease, refused with LEASE_EXPIRED. The server is another process on the host's clock: rather
  // than sleep past the lease, its end is moved a minute into the past behind the server's back (as below).
  await okJson(api, "Submit", { queue: "secrets-expiry", task: "t" });
  const [short] = leasesFrom((await okJson(api, "Claim", { queue: "secrets-expiry", workerId: "slow", leaseDuration: "1s" })).leases);
  writeBehindTheServer("UPDATE jobs SET lease_expire_time = lease_expire_time - 60000 WHERE id = ?", short.job.id);
  const expired = await call("Complete", { jobId: short.job.id, leaseToken: short.leaseToken });
  expect(expired.body?.details?.[0]?.debug?.reason).toBe("LEASE_EXPIRED");

  // A job whose lease cannot be delivered (written deeper than the API allows): logged, dead-lettered.
  const { job: legacy } = await okJson(api, "Submit", { queue: "secrets-poison", task: "t" });
  writeBehindTheServer("UPDATE jobs SET payload = ? WHERE id = ?", `${"[".repeat(60)}1${"]".repeat(60)}`, legacy.id);
  expect((await call("Claim", { queue: "secrets-poison", workerId: "poisoned" })).body).toEqual({});
  await server.waitForLine(
    (_, json) => json?.msg === "lease cannot be encoded for a worker; job dead-lettered" && json.jobId === legacy.id,
  );

  // Everything a reader, an operator or a scraper sees.
  const jobs = await listAllJobs(api);
  shown.push(JSON.stringify(jobs));
  for (const job of jobs) {
    shown.push(JSON.stringify((await call("GetJob", { jobId: job.id })).body));
    shown.push(JSON.stringify((await call("ListJobEvents", { jobId: job.id })).body));
  }
  shown.push(JSON.stringify((await call("GetStats", {})).body));
  shown.push(await (await fetch(`${server.metricsUrl}/metrics`)).text());
  const html = await (await fetch(`${api}/`)).text();
  shown.push(html);
  const assets = [...html.matchAll(/(?:src|href)="\/?([^"]+)"/g)].map((m) => m[1]).filter((p) => !p.startsWith("http"));
  expect(assets.length).toBeGreaterThan(0);
  for (const asset of assets) shown.push(await (await fetch(`${api}/${asset}`)).text());
  watch.abort();
  await events.done;
  expect(events.text()).toContain("EVENT_KIND_DEAD_LETTERED");
  shown.push(events.text());
  shown.push(...server.lines, ...server.stderrLines);

  const corpus = shown.join("\n");
  const hashes = tokens.flatMap((t) => {
    const digest = createHash("sha256").update(t).digest();
    return [digest.toString("hex"), digest.toString("base64"), digest.toString("base64url")];
  });
  const leaks = [...keys, ...tokens, ...hashes].filter((s) => corpus.includes(s));
  console.log(
    `secrets: ${keys.length} keys, ${tokens.length} tokens checked against ${corpus.length} characters ` +
      `(${server.lines.length} log lines, ${assets.length} console files)`,
  );
  expect(leaks).toEqual([]);
  // The check itself works: the tokens really were handed out, in the Claim answers.
  expect(tokens.filter((t) => t !== guessed).every((t) => t.length >= 22)).toBe(true);
});
