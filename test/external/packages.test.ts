/**
 * What users install, from a clean directory (docs/development.md "What users
 * install"):
 *
 * - `npm pack` of the project, installed with `npm install <tarball>` into an
 *   empty directory: `npx leasequeue serve` starts, and a plain ESM script
 *   that imports from "leasequeue/worker" submits a job with a plain JSON
 *   payload, runs a worker on it and waits for its result.
 * - the Python package built as a wheel (pip wheel with Debian's setuptools
 *   and wheel, offline) and installed into a fresh venv, from another
 *   directory: it submits a job to that server and waits for its end.
 *
 * The npm install fetches the dependencies as a user's would (from the npm
 * cache when it has them) and builds better-sqlite3 from source. Under
 * CI=true a missing tool fails the test (tools.ts).
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnInstalledServer, type SpawnedServer } from "../helpers/process.js";
import { PYTHON_TOOLS, pythonAvailable, SYSTEM_PYTHON } from "./sdk-builds.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable } from "./tools.js";

const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
let consumer: string;
let server: SpawnedServer;

beforeAll(async () => {
  const packed = tempDir("leasequeue-pack-");
  // The checkout is built (npm test builds first); the tarball is what `npm publish` would upload.
  const pack = await run("npm", ["pack", "--ignore-scripts", "--pack-destination", packed], { cwd: REPO_ROOT, timeout: 120_000 });
  expect(pack.code, pack.stderr).toBe(0);
  const tarball = join(
    packed,
    readdirSync(packed).find((f) => f.endsWith(".tgz"))!,
  );
  consumer = tempDir("leasequeue-consumer-");
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const install = await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
    cwd: consumer,
    timeout: 600_000,
  });
  expect(install.code, `${install.stdout}\n${install.stderr}`).toBe(0);
  server = await spawnInstalledServer(consumer, join(consumer, "jobs.db"));
}, 720_000);

afterAll(async () => {
  await server?.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("the npm package, installed from its tarball into an empty directory", () => {
  it("serves with `npx leasequeue serve`", async () => {
    const res = await fetch(`${server.metricsUrl}/health/ready`);
    expect(res.status).toBe(200);
  });

  it("ships no test helpers (src/testing)", () => {
    const installed = join(consumer, "node_modules/leasequeue/dist/src");
    expect(existsSync(join(installed, "store/store.js"))).toBe(true);
    expect(existsSync(join(installed, "testing"))).toBe(false);
  });

  it("runs a plain ESM script that imports createWorker from leasequeue/worker", async () => {
    writeFileSync(
      join(consumer, "double.mjs"),
      `import { createLeaseQueueClient, createWorker, submitAndWait } from "leasequeue/worker";
const client = createLeaseQueueClient({ url: process.argv[2] });
const worker = createWorker({ client, queue: "packaged", workerId: "packaged-1", handler: (_job, ctx) => ({ doubled: ctx.payload.n * 2 }) });
const { result } = await submitAndWait(client, { queue: "packaged", task: "double", payload: { n: 21 } }, { waitMs: 120000 });
console.log(JSON.stringify(result));
await worker.close();
`,
    );
    const out = await run(process.execPath, ["double.mjs", server.apiUrl], { cwd: consumer, timeout: 120_000 });
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout.trim())).toEqual({ doubled: 42 });
  });
});

const skipPython = skipUnlessAvailable(pythonAvailable);

describe.skipIf(skipPython)("the Python package, as a wheel installed into a fresh venv", () => {
  it("builds a wheel, installs it and submits and waits for a job", async () => {
    requireTool(pythonAvailable, PYTHON_TOOLS);
    // setup.py copies the generated stubs from ../../gen/python: build from a copy of both.
    const source = tempDir("leasequeue-wheel-src-");
    cpSync(join(REPO_ROOT, "clients/python"), join(source, "clients/python"), {
      recursive: true,
      filter: (path) => !/\/(build|[^/]*\.egg-info|__pycache__)$/.test(path),
    });
    cpSync(join(REPO_ROOT, "gen/python"), join(source, "gen/python"), { recursive: true });
    const wheels = join(source, "wheels");
    mkdirSync(wheels);
    const env = { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1", PYTHONDONTWRITEBYTECODE: "1", PYTHONPATH: "" };
    const built = await run(
      SYSTEM_PYTHON,
      ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, join(source, "clients/python")],
      { cwd: source, env, timeout: 180_000 },
    );
    expect(built.code, `${built.stdout}\n${built.stderr}`).toBe(0);
    const wheel = readdirSync(wheels).find((f) => /^leasequeue-.*-py3-none-any\.whl$/.test(f));
    expect(wheel, readdirSync(wheels).join(", ")).toBeDefined();

    // A fresh venv over Debian's grpcio and protobuf (PyPI is out of reach), the wheel alone installed into it.
    const venv = join(tempDir("leasequeue-wheel-venv-"), "venv");
    expect((await run(SYSTEM_PYTHON, ["-m", "venv", "--system-site-packages", venv], { timeout: 120_000 })).code).toBe(0);
    const python = join(venv, "bin/python");
    const installed = await run(python, ["-m", "pip", "install", "--no-index", "--no-deps", join(wheels, wheel!)], {
      cwd: tmpdir(),
      env,
      timeout: 180_000,
    });
    expect(installed.code, `${installed.stdout}\n${installed.stderr}`).toBe(0);

    const target = new URL(server.apiUrl).host;
    const script = `
import sys, leasequeue
client = leasequeue.Client(sys.argv[1])
job = client.submit("wheel", "t", {"from": "wheel"})
ended, finished = client.wait_job(job.id, 0)
print(leasequeue.__file__)
print(job.id, finished)
`;
    const out = await run(python, ["-c", script, target], { cwd: tmpdir(), env, timeout: 60_000 });
    expect(out.code, out.stderr).toBe(0);
    const [file, line] = out.stdout.trim().split("\n");
    expect(file.startsWith(venv)).toBe(true);
    const [id, finished] = line.split(" ");
    expect(finished).toBe("False");
    const got = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/GetJob`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jobId: id }),
    });
    expect(((await got.json()) as { job: unknown }).job).toMatchObject({ queue: "wheel", payload: { from: "wheel" } });
  });
});
