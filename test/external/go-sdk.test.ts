/**
 * The Go SDK (clients/go) as clients/go/README.md builds it: GOPATH mode,
 * offline, from Debian's Go packages and the code committed in gen/go.
 * `go vet` and its unit tests (an in-process fake server), built both without
 * and with the `otel` tag (OpenTelemetry spans, clients/go/tracing_otel.go),
 * then the example worker (examples/go-worker) against a live server. The
 * behaviour shared with the other SDKs is test/conformance/.
 *
 * Debian packages: golang-go, golang-google-grpc-dev (grpc-go 1.33),
 * golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev,
 * golang-google-genproto-dev; golang-opentelemetry-otel-dev for the `otel`
 * tag. Under CI=true a missing one fails the test (tools.ts).
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import {
  goAvailable,
  goBuild,
  goOtelAvailable,
  goWorkspace,
  GO_OTEL_TOOLS,
  GO_TOOLS,
  removeBuilds,
  type GoWorkspace,
} from "./sdk-builds.js";
import { requireTool, run, skipUnlessAvailable } from "./tools.js";

const skip = skipUnlessAvailable(goAvailable);
let ws: GoWorkspace;
let server: TestServer;

beforeAll(async () => {
  if (skip) return;
  ws = goWorkspace();
  server = await startTestServer();
}, 60_000);

afterAll(async () => {
  await server?.close();
  removeBuilds();
});

describe.skipIf(skip)("the Go SDK", () => {
  it("passes go vet and its unit tests, built offline in GOPATH mode", async () => {
    requireTool(goAvailable, GO_TOOLS);
    for (const args of [
      ["vet", "leasequeue/clients/go", "leasequeue/examples/go-worker", "leasequeue/test/conformance/drivers/go-driver"],
      ["test", "-count=1", "leasequeue/clients/go"],
    ]) {
      const out = await run("go", args, { cwd: ws.dir, env: ws.env, timeout: 300_000 });
      expect(out.code, `go ${args.join(" ")}\n${out.stdout}${out.stderr}`).toBe(0);
    }
  }, 320_000);

  it.skipIf(skipUnlessAvailable(goOtelAvailable))(
    "passes go vet and its unit tests built with -tags otel (the attempt spans)",
    async () => {
      requireTool(goOtelAvailable, GO_OTEL_TOOLS);
      const vet = ["vet", "-tags", "otel", "leasequeue/clients/go", "leasequeue/examples/go-worker"];
      const test = ["test", "-count=1", "-tags", "otel", "-v", "leasequeue/clients/go"];
      for (const args of [vet, test]) {
        const out = await run("go", args, { cwd: ws.dir, env: ws.env, timeout: 300_000 });
        expect(out.code, `go ${args.join(" ")}\n${out.stdout}${out.stderr}`).toBe(0);
        // The tracing tests exist only in the tagged build: they ran.
        if (args === test) expect(out.stdout).toMatch(/^--- PASS: TestEachAttemptIsAConsumerSpanChildOfTheJobsContext/m);
      }
    },
    320_000,
  );

  it("runs the example worker and producer: a result, a permanent failure, a producer waiting for its job's end, and a drain on SIGTERM", async () => {
    requireTool(goAvailable, GO_TOOLS);
    const bin = await goBuild(ws, "leasequeue/examples/go-worker", "go-worker");
    const queue = "go-example";
    const submit = async (payload: unknown) => (await server.call("Submit", { queue, task: "demo.add", payload })).body.job.id as string;
    const sum = await submit({ a: 2, b: 3 });
    const bad = await submit({ a: "x" });
    // SubmitAndWait (examples/go-producer), started before the worker: answered by the job's end.
    const producer = await goBuild(ws, "leasequeue/examples/go-producer", "go-producer");
    const waited = run(producer, ["demo.add", '{"a": 40, "b": 2}'], {
      env: { ...process.env, LEASEQUEUE_URL: server.apiUrl, LEASEQUEUE_QUEUE: queue },
    });
    const worker = spawn(bin, [], {
      env: { ...process.env, LEASEQUEUE_URL: server.apiUrl, LEASEQUEUE_QUEUE: queue },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    worker.stderr.setEncoding("utf8").on("data", (d: string) => (log += d));
    const exited = new Promise<number | null>((resolve) => worker.once("close", resolve));
    try {
      const finished = (id: string) =>
        until(
          `job ${id} completed or dead`,
          async () => {
            const job = (await server.call("GetJob", { jobId: id })).body.job;
            return job.state === "JOB_STATE_COMPLETED" || job.state === "JOB_STATE_DEAD" ? job : undefined;
          },
          { pollMs: 50 },
        ).catch((err: Error) => {
          throw new Error(`${err.message}\n${log}`, { cause: err });
        });
      const answer = await waited;
      expect(answer.code, answer.stderr).toBe(0);
      expect(JSON.parse(answer.stdout)).toMatchObject({ state: "JOB_STATE_COMPLETED", finished: true, result: { sum: 42 } });
      expect(await finished(sum), log).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { sum: 5 } });
      expect(await finished(bad), log).toMatchObject({ state: "JOB_STATE_DEAD", attempts: 1, lastError: "demo.add needs numbers a and b" });
      worker.kill("SIGTERM");
      expect(await exited, log).toBe(0);
      expect(log).toMatch(/^time=\S+ level=info msg="stopping: taking no new work" running=\d+ queue=go-example worker_id=\S+$/m);
    } finally {
      worker.kill("SIGKILL");
    }
  }, 320_000);
});
