/**
 * The command as operators run it: graceful SIGTERM with calls in flight,
 * --help / --version / bad flags / migrate, and what the logs must never
 * contain.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import * as http2 from "node:http2";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import { callJson, okJson, runCli, serversInTempDirs } from "../helpers/process.js";

const SERVICE = "/leasequeue.v1.LeaseQueueService";

/** The settings table of docs/configuration.md. */
const DOCUMENTED_SETTINGS = [
  ["LEASEQUEUE_DATABASE_PATH", "--db"],
  ["LEASEQUEUE_HOST", "--host"],
  ["LEASEQUEUE_PORT", "--port"],
  ["LEASEQUEUE_METRICS_HOST", "--metrics-host"],
  ["LEASEQUEUE_METRICS_PORT", "--metrics-port"],
  ["LEASEQUEUE_ENVIRONMENT", "--environment"],
  ["LEASEQUEUE_MAX_REQUEST_BYTES", "--max-request-bytes"],
] as const;

const sandbox = serversInTempDirs("shutdown");
const start = sandbox.start;

/**
 * A Connect JSON call on an HTTP/2 session whose request body is sent in two
 * parts: the first now, the rest when `finish()` is called. Until then the
 * call is in flight on the server (its handler is reading the body).
 */
function h2Call(session: http2.ClientHttp2Session, method: string, body: unknown, opts: { split?: boolean } = {}) {
  const bytes = Buffer.from(JSON.stringify(body));
  const stream = session.request({
    ":method": "POST",
    ":path": `${SERVICE}/${method}`,
    "content-type": "application/json",
    "content-length": String(bytes.length),
  });
  const cut = opts.split ? Math.floor(bytes.length / 2) : bytes.length;
  stream.write(bytes.subarray(0, cut));
  if (!opts.split) stream.end();
  const reply = new Promise<{ status: number; body: any }>((resolve, reject) => {
    let status = 0;
    let text = "";
    stream.on("response", (headers) => (status = Number(headers[":status"])));
    stream.setEncoding("utf8");
    stream.on("data", (d: string) => (text += d));
    stream.on("end", () => resolve({ status, body: text === "" ? undefined : JSON.parse(text) }));
    stream.on("error", reject);
  });
  return {
    reply,
    finish() {
      stream.end(bytes.subarray(cut));
    },
  };
}

describe("SIGTERM", () => {
  it("lets in-flight calls finish, ends the long-poll, exits 0 and leaves a clean database", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const server = await start(dbPath);

    const acknowledged: string[] = [];
    for (let i = 0; i < 10; i++) {
      const { job } = await okJson(server.apiUrl, "Submit", { queue: "work", task: "t", payload: { i } });
      acknowledged.push(job.id);
    }

    const session = http2.connect(server.apiUrl);
    session.on("error", () => {});
    try {
      // 1. A long-poll on an empty queue.
      const pollStarted = Date.now();
      const poll = h2Call(session, "Claim", { queue: "idle", workerId: "poller", wait: "30s" });
      // 2. A unary Submit whose body is only half sent: in flight on the server.
      const slow = h2Call(session, "Submit", { queue: "work", task: "t", payload: { late: true } }, { split: true });
      // 3. A complete write on the same session: once it is answered, the
      //    server has taken the two earlier streams (HTTP/2 keeps their
      //    order) and the claim, committed no later than this submit, is parked.
      const probe = await h2Call(session, "Submit", { queue: "probe", task: "t" }).reply;
      expect(probe.status).toBe(200);
      acknowledged.push(probe.body.job.id);
      const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
      expect(metrics).toMatch(/^leasequeue_claim_waiters 1$/m);

      const signalled = Date.now();
      server.child.kill("SIGTERM");
      await server.waitForLine((_l, j) => j?.msg === "shutting down");

      // The long-poll returns at once instead of waiting 30 s: with an empty
      // lease list (the handler sees its context aborted and answers normally).
      const polled = await poll.reply;
      expect(Date.now() - pollStarted).toBeLessThan(10_000);
      expect(polled).toEqual({ status: 200, body: {} });

      // The half-sent Submit still completes after the signal.
      slow.finish();
      const late = await slow.reply;
      expect(late.status, JSON.stringify(late.body)).toBe(200);
      acknowledged.push(late.body.job.id);

      session.close();
      const exit = await server.exited;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(Date.now() - signalled).toBeLessThan(5_000);
    } finally {
      session.destroy();
    }

    const msgs = server.lines.map((l) => JSON.parse(l).msg);
    expect(msgs).toEqual(expect.arrayContaining(["signal received", "shutting down", "stopped"]));
    expect(msgs.at(-1)).toBe("stopped");
    expect(server.stderrLines).toEqual([]);

    // Closed cleanly: the WAL was checkpointed and removed, the file is sound
    // and holds every acknowledged job.
    expect(existsSync(`${dbPath}-wal`)).toBe(false);
    const db = new Database(dbPath, { readonly: true });
    try {
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      const ids = (db.prepare("SELECT id FROM jobs ORDER BY id").all() as Array<{ id: string }>).map((r) => r.id);
      expect(ids).toEqual([...acknowledged].sort());
    } finally {
      db.close();
    }

    // And the server starts again on it.
    const again = await start(dbPath);
    const { total } = await okJson(again.apiUrl, "GetStats", {});
    expect(Number(total.queued)).toBe(acknowledged.length);
    expect(Number(total.running ?? 0)).toBe(0); // the interrupted long-poll leased nothing
    expect(await again.stop("SIGINT")).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe("SIGTERM under load", () => {
  it("answers or refuses every call, never loses an acknowledged one, and exits 0 promptly", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const server = await start(dbPath);
    const acked = new Map<string, string>(); // idempotency key -> job id
    let signalled: number | undefined;

    const ended = await Promise.all(
      Array.from({ length: 8 }, async (_, loop) => {
        for (let i = 0; i < 500; i++) {
          const key = `term-${loop}-${i}`;
          let reply;
          try {
            reply = await callJson(server.apiUrl, "Submit", { queue: "term", task: "t", payload: i, idempotencyKey: key });
          } catch (err) {
            return err; // the listener is closed: refused, as expected
          }
          // Calls the server took before or during shutdown are answered normally.
          if (reply.status !== 200) return new Error(`${key}: HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
          acked.set(key, reply.body.job.id);
          if (signalled === undefined && acked.size >= 150) {
            signalled = Date.now();
            server.child.kill("SIGTERM");
          }
        }
        return new Error("the loop ran out before the server stopped");
      }),
    );
    for (const err of ended) {
      if (!(err instanceof TypeError && err.message === "fetch failed")) throw err;
    }
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalled!).toBeLessThan(5_000);
    expect(server.stderrLines).toEqual([]);

    const db = new Database(dbPath, { readonly: true });
    try {
      const stored = new Map(
        (db.prepare("SELECT idempotency_key AS k, id FROM jobs").all() as Array<{ k: string; id: string }>).map((r) => [r.k, r.id]),
      );
      for (const [key, id] of acked) expect(stored.get(key), key).toBe(id);
      // Every stored job has its event, and the counts match the rows.
      expect(db.prepare("SELECT count(*) AS n FROM job_events WHERE kind = 'submitted'").get()).toEqual({ n: stored.size });
      expect(db.prepare("SELECT sum(count) AS n FROM job_counts").get()).toEqual({ n: stored.size });
    } finally {
      db.close();
    }
  }, 60_000);
});

describe("SIGTERM under load, seen by RPC clients over HTTP/2", () => {
  /**
   * docs/api.md's error table: a server shutting down answers `unavailable`,
   * which clients retry elsewhere; a call refused at the HTTP/2 level
   * (REFUSED_STREAM, a call sent after the server's GOAWAY left) reaches
   * connect-node as `internal`. Each loop calls Submit back to back on its
   * client's one HTTP/2 connection until a call fails, so that calls are in
   * flight, and the next ones about to be sent, whenever the server starts
   * closing its connections.
   */
  it("answers every call or fails it with unavailable, never internal", async () => {
    const server = await start(join(sandbox.dir(), "jobs.db"));
    const url = server.apiUrl;
    const managers = [new Http2SessionManager(url), new Http2SessionManager(url)];
    const connectClients = {
      grpc: createClient(LeaseQueueService, createGrpcTransport({ baseUrl: url, sessionManager: managers[0] })),
      connect: createClient(LeaseQueueService, createConnectTransport({ baseUrl: url, httpVersion: "2", sessionManager: managers[1] })),
    };
    const definition = protoLoader.loadSync("leasequeue/v1/leasequeue.proto", {
      includeDirs: [fileURLToPath(new URL("../../proto", import.meta.url))],
    });
    const pkg = grpc.loadPackageDefinition(definition) as any;
    const grpcJs: grpc.Client & { submit: (req: object, cb: (err: grpc.ServiceError | null) => void) => void } =
      new pkg.leasequeue.v1.LeaseQueueService(new URL(url).host, grpc.credentials.createInsecure());

    type Submit = () => Promise<void>;
    const submits: Record<string, Submit> = {
      "connect-node gRPC": async () => void (await connectClients.grpc.submit({ queue: "term", task: "t" })),
      "connect-node Connect": async () => void (await connectClients.connect.submit({ queue: "term", task: "t" })),
      "grpc-js": () =>
        new Promise((resolve, reject) => grpcJs.submit({ queue: "term", task: "t" }, (err) => (err ? reject(err) : resolve()))),
    };
    const answered = new Map(Object.keys(submits).map((name) => [name, 0]));
    const failures: { code: Code; call: string }[] = [];
    let signalled = false;
    try {
      await Promise.all(
        Object.entries(submits).flatMap(([name, submit]) =>
          Array.from({ length: 8 }, async () => {
            for (;;) {
              try {
                await submit();
              } catch (err) {
                // grpc-js's status codes are gRPC's, as are connect's.
                const code: Code = err instanceof ConnectError ? err.code : Number((err as grpc.ServiceError).code);
                failures.push({ code, call: `${name}: ${Code[code]}: ${(err as Error).message}` });
                return;
              }
              answered.set(name, answered.get(name)! + 1);
              // Signalled once every client has its connection open and busy.
              if (!signalled && [...answered.values()].every((n) => n >= 25)) {
                signalled = true;
                server.child.kill("SIGTERM");
              }
            }
          }),
        ),
      );
    } finally {
      for (const manager of managers) manager.abort();
      grpcJs.close();
    }
    expect(signalled).toBe(true);
    // Every loop ended on a failure (the server stopped), and each was `unavailable`.
    expect(failures.length).toBe(3 * 8);
    expect(failures.filter((f) => f.code !== Code.Unavailable).map((f) => f.call)).toEqual([]);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stderrLines).toEqual([]);
  }, 60_000);
});

describe("the command line", () => {
  it("--help lists every documented setting and exits 0", async () => {
    const r = await runCli(["--help"]);
    expect(r.code).toBe(0);
    for (const [env, flag] of DOCUMENTED_SETTINGS) {
      expect(r.stdout).toContain(env);
      expect(r.stdout).toContain(flag);
    }
    expect(r.stdout).toContain("migrate");
  });

  it("--version prints the package version", async () => {
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default as { version: string };
    const r = await runCli(["--version"]);
    expect(r).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it("refuses a bad setting with exit code 2 and a message naming it", async () => {
    const flag = await runCli(["--port", "abc", "--db", join(sandbox.dir(), "never.db")]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("--port");
    expect(flag.stderr).toContain("abc");

    const env = await runCli(["--db", join(sandbox.dir(), "never.db")], { LEASEQUEUE_PORT: "abc" });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain("LEASEQUEUE_PORT");

    const unknown = await runCli(["--no-such-flag"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no-such-flag");
    expect(existsSync(join(sandbox.dir(), "never.db"))).toBe(false);
  });

  it("migrate creates a migrated database and exits 0, and is idempotent", async () => {
    const dbPath = join(sandbox.dir(), "migrated.db");
    const r = await runCli(["migrate", "--db", dbPath]);
    expect(r.code, r.stderr).toBe(0);
    const latest = MIGRATIONS.at(-1)!.version;
    const logged = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(logged).toContainEqual(expect.objectContaining({ msg: "migrations applied", applied: MIGRATIONS.map((m) => m.version) }));

    const db = new Database(dbPath, { readonly: true });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(latest);
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map(
        (t) => t.name,
      );
      expect(tables).toEqual(expect.arrayContaining(["jobs", "job_events", "job_counts"]));
    } finally {
      db.close();
    }

    const again = await runCli(["migrate", "--db", dbPath]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout.trim())).toMatchObject({ msg: "migrations applied", applied: [], version: latest });
  });
});

describe("logs", () => {
  it("never contain a lease token, an idempotency key or a payload value", async () => {
    const secret = randomBytes(8).toString("hex");
    const key = `idem-key-${secret}`;
    const headerKey = `idem-header-${secret}`;
    const payloadValue = `payload-value-${secret}`;
    const resultValue = `result-value-${secret}`;
    const server = await start(join(sandbox.dir(), "jobs.db"), ["--log-level", "debug"]);
    const api = server.apiUrl;

    const submit = { queue: "secrets", task: "t", payload: { card: payloadValue }, idempotencyKey: key };
    const { job } = await okJson(api, "Submit", submit);
    await okJson(api, "Submit", { queue: "secrets", task: "t", payload: { card: payloadValue } }, { "idempotency-key": headerKey });
    expect((await okJson(api, "Submit", submit)).deduplicated).toBe(true);
    // Errors that involve the secrets.
    const mismatch = await callJson(api, "Submit", { ...submit, payload: { card: `${payloadValue}-changed` } });
    expect(mismatch.body.code).toBe("already_exists");
    const conflict = await callJson(api, "Submit", submit, { "idempotency-key": `${key}-other` });
    expect(conflict.body.code).toBe("invalid_argument");

    const { leases } = await okJson(api, "Claim", { queue: "secrets", workerId: "w1", maxJobs: 2 });
    expect(leases.length).toBe(2);
    const token: string = leases.find((l: any) => l.job.id === job.id).leaseToken;
    await okJson(api, "Heartbeat", { jobId: job.id, leaseToken: token });
    const wrong = await callJson(api, "Complete", { jobId: leases[1].job.id, leaseToken: token });
    expect(wrong.body.code).toBe("aborted");
    await okJson(api, "Complete", { jobId: job.id, leaseToken: token, result: { receipt: resultValue } });
    const again = await callJson(api, "Complete", { jobId: job.id, leaseToken: token });
    expect(again.body.code).toBe("aborted");

    // More concurrent calls than Node's default listener limit: writes, so
    // that they wait for a group commit together, and twice, so that the
    // second burst arrives at once on the open keep-alive connections. No
    // MaxListenersExceededWarning may reach stderr.
    for (let burst = 0; burst < 2; burst++) {
      await Promise.all(Array.from({ length: 32 }, (_, i) => okJson(api, "Submit", { queue: "noise", task: "t", payload: i })));
    }

    const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    expect(await server.stop()).toEqual({ code: 0, signal: null });

    const output = [...server.lines, ...server.stderrLines].join("\n");
    expect(output).toContain('"msg":"stopped"'); // the logs were captured
    for (const needle of [secret, key, headerKey, payloadValue, resultValue, token]) {
      expect(output).not.toContain(needle);
      expect(metrics).not.toContain(needle);
    }
    expect(server.stderrLines).toEqual([]);
  }, 60_000);
});
