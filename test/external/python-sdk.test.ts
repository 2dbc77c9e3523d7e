/**
 * The Python SDK (clients/python) as a user installs it: `pip install
 * --no-deps --no-build-isolation` into a venv over Debian's grpcio and
 * protobuf, from another directory. Its own unit tests (clients/python/tests,
 * offline against an in-process fake server) run in that venv, and the
 * examples (examples/python-worker) run against a live server. The behaviour
 * shared with the other SDKs is test/conformance/.
 *
 * Debian packages: python3-grpcio python3-protobuf python3-venv python3-pip.
 * Under CI=true a missing one fails the test (tools.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { installPythonSdk, PYTHON_TOOLS, pythonAvailable, removeBuilds } from "./sdk-builds.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable } from "./tools.js";

const skip = skipUnlessAvailable(pythonAvailable);
const ENV = { PYTHONDONTWRITEBYTECODE: "1", PYTHONUNBUFFERED: "1", PYTHONPATH: "" };
let python: string;
let server: TestServer;

beforeAll(async () => {
  if (skip) return;
  requireTool(pythonAvailable, PYTHON_TOOLS);
  python = await installPythonSdk();
  server = await startTestServer();
}, 240_000);

afterAll(async () => {
  await server?.close();
  removeBuilds();
});

function waitFinished(id: string, headers: Record<string, string> = {}, on = server): Promise<any> {
  return until(
    `job ${id} completed or dead`,
    async () => {
      const job = (await on.call("GetJob", { jobId: id }, headers)).body.job;
      return ["JOB_STATE_COMPLETED", "JOB_STATE_DEAD"].includes(job.state) ? job : undefined;
    },
    { pollMs: 50 },
  );
}

describe.skipIf(skip)("the Python SDK", () => {
  it("installs with pip and passes its unit tests from another directory", async () => {
    const tests = await run(
      python,
      ["-m", "unittest", "discover", "-s", join(REPO_ROOT, "clients/python/tests"), "-t", join(REPO_ROOT, "clients/python/tests")],
      {
        cwd: tmpdir(),
        env: { ...process.env, ...ENV },
        timeout: 120_000,
      },
    );
    expect(tests.code, tests.stderr).toBe(0);
    expect(tests.stderr).toMatch(/^Ran \d+ tests/m);
    expect(tests.stderr).toMatch(/^OK$/m);
    const typed = await run(
      python,
      ["-c", "import importlib.resources as r; print(r.files('leasequeue').joinpath('py.typed').is_file())"],
      { cwd: tmpdir() },
    );
    expect(typed.stdout.trim()).toBe("True");
  }, 150_000);

  it("runs the example worker and producer: results, a permanent failure, a producer waiting for its job's end, and a drain on SIGTERM", async () => {
    const env = { ...process.env, ...ENV, LEASEQUEUE_URL: server.apiUrl, LEASEQUEUE_QUEUE: "py-example" };
    const produce = async (task: string, payload: unknown) => {
      const out = await run(python, [join(REPO_ROOT, "examples/python-worker/producer.py"), task, JSON.stringify(payload)], {
        env,
        cwd: tmpdir(),
      });
      expect(out.code, out.stderr).toBe(0);
      return out.stdout.trim();
    };
    const sum = await produce("demo.add", { a: 2, b: 3 });
    const bad = await produce("demo.add", { a: "x" });
    const slow = await produce("demo.sleep", { seconds: 1 });
    // submit_and_wait: started before any worker runs, answered by the job's end.
    const waited = run(python, [join(REPO_ROOT, "examples/python-worker/producer.py"), "demo.add", '{"a": 40, "b": 2}', "--wait"], {
      env,
      cwd: tmpdir(),
    });
    const worker = spawn(python, [join(REPO_ROOT, "examples/python-worker/worker.py")], {
      env,
      cwd: tmpdir(),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    worker.stderr.setEncoding("utf8").on("data", (d: string) => (log += d));
    const exited = new Promise<number | null>((resolve) => worker.once("close", resolve));
    try {
      const answer = await waited;
      expect(answer.code, answer.stderr).toBe(0);
      expect(JSON.parse(answer.stdout)).toMatchObject({ state: "COMPLETED", finished: true, result: { sum: 42 } });
      expect(await waitFinished(sum), log).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { sum: 5 } });
      expect(await waitFinished(bad), log).toMatchObject({
        state: "JOB_STATE_DEAD",
        attempts: 1,
        lastError: "demo.add needs numbers a and b",
      });
      expect(await waitFinished(slow), log).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { slept: 1 } });
      worker.kill("SIGTERM");
      expect(await exited, log).toBe(0);
      expect(log).toMatch(/stopping: taking no new work/);
    } finally {
      worker.kill("SIGKILL");
    }
  }, 120_000);

  it("sends the token with every call: the producer is refused without one and works with one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-py-auth-"));
    const file = writeAuthFile(dir, [
      { name: "producer", roles: ["producer"] },
      { name: "reader", roles: ["reader"] },
    ]);
    const secured = await startTestServer({ "auth-file": file.path });
    try {
      const produce = (token: string) =>
        run(python, [join(REPO_ROOT, "examples/python-worker/producer.py"), "demo.add", '{"a": 1, "b": 2}'], {
          env: { ...process.env, ...ENV, LEASEQUEUE_URL: secured.apiUrl, LEASEQUEUE_QUEUE: "py-auth", LEASEQUEUE_TOKEN: token },
          cwd: tmpdir(),
        });
      const refused = await produce("");
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/StatusCode\.UNAUTHENTICATED/);
      const ok = await produce(file.tokens.producer);
      expect(ok.code, ok.stderr).toBe(0);
      const job = (await secured.call("GetJob", { jobId: ok.stdout.trim() }, bearer(file.tokens.reader))).body.job;
      expect(job).toMatchObject({ queue: "py-auth", task: "demo.add", state: "JOB_STATE_QUEUED" });
      expect(ok.stdout + ok.stderr + refused.stderr).not.toContain(file.tokens.producer);
    } finally {
      await secured.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
