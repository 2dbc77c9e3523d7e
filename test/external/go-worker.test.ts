/**
 * The Go example worker (examples/go-worker/main.go) built offline from
 * Debian's Go packages in GOPATH mode, as examples/go-worker/README.md says,
 * against the code committed in gen/go, then run against a live server over
 * the Work stream (docs/api.md "The batched path: Acknowledge and Work"):
 * leases down, batched acknowledgements up.
 *
 * Debian packages: golang-go, golang-google-grpc-dev (grpc-go 1.33),
 * golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev. Under
 * CI=true a missing one fails the test (tools.ts).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable, works } from "./tools.js";
import {
  acknowledgesInBatches,
  authRequired,
  drainOnSigterm,
  endToEnd,
  killWorkers,
  leaseLostStopsTheHandler,
  maxJobsThenExit,
  rpcCounts,
  serverDownWhileJobFinishes,
  serverRestartMidJob,
  shutdownGraceFailsLeftovers,
  type WorkerCommand,
} from "./worker-scenarios.js";

const GO = "go";
const GOCODE = "/usr/share/gocode";
const available =
  (await works(GO, ["version"])) &&
  existsSync(join(GOCODE, "src/google.golang.org/grpc/server.go")) &&
  existsSync(join(GOCODE, "src/google.golang.org/protobuf/proto/proto.go")) &&
  // registry.go exists from golang/protobuf 1.4 on: with the 1.3 package grpc
  // compiles and then panics on the first call (stack-notes.md).
  existsSync(join(GOCODE, "src/github.com/golang/protobuf/proto/registry.go"));
const skip = skipUnlessAvailable(available);
const TOOLS = "go (golang-go) with golang-google-grpc-dev, golang-google-protobuf-dev and golang-github-golang-protobuf-1-5-dev";

let server: TestServer;
let gopath: string;
let worker: WorkerCommand;

beforeAll(async () => {
  if (skip) return;
  server = await startTestServer();
  gopath = mkdtempSync(join(tmpdir(), "leasequeue-gopath-"));
}, 30_000);

afterEach(() => killWorkers());

afterAll(async () => {
  await server?.close();
  if (gopath) rmSync(gopath, { recursive: true, force: true });
});

describe.skipIf(skip)("Go example worker", () => {
  it("builds offline in GOPATH mode from Debian's packages and gen/go", async () => {
    requireTool(available, TOOLS);
    // The import path leasequeue/... is this repository (go_package in the proto).
    mkdirSync(join(gopath, "src"));
    symlinkSync(REPO_ROOT.replace(/\/$/, ""), join(gopath, "src", "leasequeue"));
    const bin = join(gopath, "go-worker");
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      GO111MODULE: "off",
      GOPATH: `${gopath}:${GOCODE}`,
      GOPROXY: "off",
      GOFLAGS: "",
      // A build cache is needed; keep the user's if there is a home for it.
      ...(process.env.HOME || process.env.GOCACHE || process.env.XDG_CACHE_HOME ? {} : { GOCACHE: join(gopath, "cache") }),
    };
    const build = await run(GO, ["build", "-o", bin, "leasequeue/examples/go-worker"], { cwd: gopath, env, timeout: 300_000 });
    expect(build.code, build.stderr).toBe(0);
    const vet = await run(GO, ["vet", "leasequeue/examples/go-worker"], { cwd: gopath, env, timeout: 300_000 });
    expect(vet.code, vet.stderr).toBe(0);
    worker = { file: bin, args: [] };
  }, 320_000);

  it("processes jobs end to end: results, dead letter, retry, heartbeats; SIGTERM exits 0", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await endToEnd(server, worker, "go");
  }, 60_000);

  it("drains on SIGTERM: half-closes the stream, finishes the running job with Acknowledge, takes no new one", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    const before = (await rpcCounts(server)).get("Acknowledge") ?? 0;
    await drainOnSigterm(server, worker, "go");
    // After the half-close no stream carries the job's heartbeats and outcome.
    expect((await rpcCounts(server)).get("Acknowledge") ?? 0).toBeGreaterThan(before);
  }, 30_000);

  it("fails a job that outlasts the shutdown grace period so it retries at once", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await shutdownGraceFailsLeftovers(server, worker, "go");
  }, 30_000);

  it("stops by itself after LEASEQUEUE_MAX_JOBS leases", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await maxJobsThenExit(server, worker, "go");
  }, 30_000);

  it("acknowledges on the Work stream: no StreamClaims, Complete, Fail or Heartbeat call", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await acknowledgesInBatches(server, worker, "go", {
      used: ["Work"],
      unused: ["StreamClaims", "Complete", "Fail", "Heartbeat", "Acknowledge"],
    });
  }, 30_000);

  it("keeps a job across a server restart: heartbeats go on, the outcome is acknowledged after it, not by Complete", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await serverRestartMidJob(worker, "go", async (restarted) => {
      const counts = await rpcCounts(restarted);
      expect(counts.get("Work") ?? 0).toBeGreaterThan(0);
      expect(counts.get("Complete") ?? 0).toBe(0);
    });
  }, 30_000);

  it("keeps the outcome of a job that finishes while the server is down and delivers it once it is back", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await serverDownWhileJobFinishes(worker, "go");
  }, 30_000);

  it("stops a handler whose lease was lost (heartbeat answered aborted) and reports nothing for it", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await leaseLostStopsTheHandler(server, worker, "go");
  }, 30_000);

  it("with authentication on: completes nothing and says why without LEASEQUEUE_TOKEN or with another queue's token; works with a worker token for its queue", async () => {
    requireTool(available, TOOLS);
    expect(worker, "the build failed").toBeDefined();
    await authRequired(worker, "go");
  }, 60_000);
});
