#!/usr/bin/env node
// npm run test:container: build the Dockerfile with podman and run the image as users would, then
// run compose.yaml's services one by one from the file (docs/development.md "The container").
//
// 1. A base image made from Debian packages (debootstrap of trixie, Debian's nodejs 20 and npm, a
//    `node` user with uid/gid 1000 as in the official images, the machine's local CAs), kept in
//    podman's storage under a tag that hashes its recipe: a second run does not debootstrap again.
// 2. `podman build --isolation chroot --format docker --build-arg NODE_IMAGE=<base>` of the Dockerfile.
// 3. The image run like the Dockerfile's header says (--read-only, a volume for /data, both ports):
//    ready, unprivileged, read-only, Submit/Claim/Complete over Connect JSON from the host, the
//    HEALTHCHECK, a restart keeps the jobs, SIGTERM with a long-poll in flight stops it within the
//    drain time, a new container on the same volume finds the jobs.
// 4. compose.yaml's services, each translated key by key into `podman run` (an unknown key fails the
//    test), on ports the kernel picks: the same checks for ready, hardening, jobs, healthcheck, stop.
//
// Needs root, podman, runc and debootstrap (Debian: apt-get install podman runc debootstrap).
// Outside CI a missing tool skips; under CI=true it fails. Logs: test-artifacts/container/.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CI = process.env.CI === "true";
const LOGS = join(ROOT, "test-artifacts", "container");
const SERVICE = "leasequeue.v1.LeaseQueueService";
const DRAIN_SECONDS = 10; // SHUTDOWN_GRACE_MS in src/app.ts, "Logs and signals" in docs/operations.md
const READY_DEADLINE_MS = 90_000; // bounds a hang: a start takes about a second
const RUN_ID = `lqct-${process.pid}`;

// The base image's recipe: every input that changes it is hashed into its tag.
const BASE = {
  suite: process.env.LEASEQUEUE_TEST_DEBIAN_SUITE ?? "trixie", // nodejs 20.19; bookworm's is 18
  mirror: process.env.LEASEQUEUE_TEST_DEBIAN_MIRROR ?? "http://deb.debian.org/debian",
  repository: "localhost/leasequeue-test-node",
  localCas: "/usr/local/share/ca-certificates",
  containerfile: [
    "FROM {{rootfs}}",
    // The machine's own CAs (a proxy's, a company's) so that npm reaches the registry from the build.
    "COPY ca/ /usr/local/share/ca-certificates/",
    "RUN update-ca-certificates \\",
    " && apt-get update \\",
    " && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm \\",
    // As in the official node images: user and group `node`, uid and gid 1000.
    " && groupadd --gid 1000 node \\",
    " && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \\",
    " && apt-get clean && rm -rf /var/lib/apt/lists/* \\",
    " && node -e 'const [major] = process.versions.node.split(\".\"); if (+major < 20) { console.error(process.version); process.exit(1); }'",
    'CMD ["node"]',
  ].join("\n"),
};
const APP_IMAGE = "localhost/leasequeue-test:app";
const BUILD_STAGE_IMAGE = "localhost/leasequeue-test:build-stage";
const COMPOSE_IMAGE = "localhost/leasequeue-test:compose";
// On the base image, so every image built on it carries it: the prune after a build finds them by it.
const LABEL = "org.leasequeue.test=container";

const work = mkdtempSync(join(tmpdir(), "leasequeue-container-"));
// podman run --runtime runc fails here on the default ulimits (RLIMIT_NOFILE above the hard limit): cleared.
const CONTAINERS_CONF = join(work, "containers.conf");
writeFileSync(CONTAINERS_CONF, '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n');
const ENV = { ...process.env, CONTAINERS_CONF, BUILDAH_ISOLATION: "chroot", BUILDAH_FORMAT: "docker" };
rmSync(LOGS, { recursive: true, force: true });
mkdirSync(LOGS, { recursive: true });

const started = Date.now();
const results = [];
const cleanups = [];

/** Runs a command; resolves { code, stdout, stderr }. `log` appends its output to a file under LOGS. */
function sh(cmd, args, { input, log, check = true } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { env: ENV, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const file = log ? createWriteStream(join(LOGS, log), { flags: "a" }) : undefined;
    file?.write(`\n$ ${cmd} ${args.join(" ")}\n`);
    child.stdout.on("data", (d) => {
      stdout += d;
      file?.write(d);
    });
    child.stderr.on("data", (d) => {
      stderr += d;
      file?.write(d);
    });
    child.on("error", reject);
    child.on("close", (code) => {
      file?.end();
      if (check && code !== 0) {
        const tail = (stdout + stderr).trim().split("\n").slice(-25).join("\n");
        reject(new Error(`${cmd} ${args.slice(0, 4).join(" ")} ... exited ${code}${log ? ` (log: ${join(LOGS, log)})` : ""}\n${tail}`));
      } else resolvePromise({ code, stdout, stderr });
    });
    if (input) input.pipe(child.stdin);
    else child.stdin.end();
  });
}
const podman = (args, opts) => sh("podman", args, opts);

async function step(name, fn) {
  const t0 = Date.now();
  try {
    const note = await fn();
    results.push({ name, ok: true });
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)${note ? `: ${note}` : ""}`);
  } catch (err) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    throw err;
  }
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

function which(tool) {
  return (process.env.PATH ?? "").split(":").some((dir) => existsSync(join(dir, tool)));
}

// ---- the base image ------------------------------------------------------------------------

function localCaFiles() {
  if (!existsSync(BASE.localCas)) return [];
  return readdirSync(BASE.localCas, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith(".crt"))
    .sort();
}

function baseImageTag() {
  const hash = createHash("sha256");
  hash.update(JSON.stringify({ suite: BASE.suite, mirror: BASE.mirror, containerfile: BASE.containerfile }));
  for (const f of localCaFiles()) hash.update(f).update(readFileSync(join(BASE.localCas, f)));
  return `${BASE.repository}:${BASE.suite}-${hash.digest("hex").slice(0, 16)}`;
}

async function ensureBaseImage() {
  const tag = baseImageTag();
  if ((await podman(["image", "exists", tag], { check: false })).code === 0) return { tag, note: `${tag} (cached)` };
  if (!which("debootstrap")) throw new Error("debootstrap is missing (apt-get install debootstrap)");
  const dir = join(work, "base");
  const rootfs = join(dir, "rootfs");
  mkdirSync(join(dir, "ca"), { recursive: true });
  await sh("debootstrap", ["--variant=minbase", "--include=ca-certificates", BASE.suite, rootfs, BASE.mirror], { log: "base-image.log" });
  const rootfsTag = `localhost/leasequeue-test-rootfs:${RUN_ID}`;
  const tar = spawn("tar", ["-C", rootfs, "--numeric-owner", "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
  const tarExit = new Promise((r) => tar.on("close", r));
  await podman(["import", "-", rootfsTag], { input: tar.stdout, log: "base-image.log" });
  assert((await tarExit) === 0, `tar of ${rootfs} failed`);
  rmSync(rootfs, { recursive: true, force: true });
  for (const f of localCaFiles()) writeFileSync(join(dir, "ca", f.replaceAll("/", "_")), readFileSync(join(BASE.localCas, f)));
  writeFileSync(join(dir, "Containerfile"), BASE.containerfile.replace("{{rootfs}}", rootfsTag));
  try {
    await podman(["build", "--isolation", "chroot", "--squash-all", "--label", LABEL, "-t", tag, "-f", join(dir, "Containerfile"), dir], {
      log: "base-image.log",
    });
  } finally {
    await podman(["rmi", rootfsTag], { check: false });
  }
  // Older recipes' base images are of no more use.
  const { stdout } = await podman(["images", "--format", "{{.Repository}}:{{.Tag}}", BASE.repository]);
  for (const old of stdout.split("\n").filter((t) => t && t !== tag)) await podman(["rmi", old], { check: false });
  return { tag, note: `${tag} (built)` };
}

// ---- talking to a running container -------------------------------------------------------

async function hostPort(container, port) {
  const { stdout } = await podman(["port", container, `${port}/tcp`]);
  const address = stdout.trim().split("\n")[0];
  assert(/^127\.0\.0\.1:\d+$/.test(address), `${container} ${port}/tcp is published on ${address}, expected 127.0.0.1 only`);
  return `http://${address}`;
}

async function inspect(container) {
  const { stdout } = await podman(["inspect", "--type", "container", container]);
  return JSON.parse(stdout)[0];
}

async function logsOf(container) {
  const { stdout, stderr } = await podman(["logs", container], { check: false });
  return stdout + stderr;
}

/** Polls /health/ready until 200, failing at once if the container stops. */
async function waitReady(container) {
  const side = await hostPort(container, 9464);
  const deadline = Date.now() + READY_DEADLINE_MS;
  for (;;) {
    const state = (await inspect(container)).State;
    if (!state.Running) throw new Error(`${container} stopped (exit ${state.ExitCode}) before it was ready:\n${await logsOf(container)}`);
    const status = await fetch(`${side}/health/ready`, { signal: AbortSignal.timeout(5000) }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    if (Date.now() > deadline)
      throw new Error(`${container}: /health/ready not 200 after ${READY_DEADLINE_MS} ms:\n${await logsOf(container)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function call(api, rpc, body, timeoutMs = 30_000) {
  const res = await fetch(`${api}/${SERVICE}/${rpc}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

async function ok(api, rpc, body) {
  const reply = await call(api, rpc, body);
  assert(reply.status === 200, `${rpc} answered ${reply.status}: ${JSON.stringify(reply.body)}`);
  return reply.body;
}

async function execNode(container, code) {
  const { stdout } = await podman(["exec", container, "node", "-e", code]);
  return stdout.trim();
}

/** The job round trip from the host: one job completed, one left queued for the restart. */
async function submitClaimComplete(container, queue) {
  const api = await hostPort(container, 8080);
  const first = await ok(api, "Submit", { queue, task: "container.check", payload: { n: 1 }, idempotencyKey: `${queue}-1` });
  const claim = await ok(api, "Claim", { queue, workerId: "container-test", maxJobs: 1 });
  const lease = claim.leases?.[0];
  assert(lease?.job?.id === first.job.id, `Claim leased ${JSON.stringify(claim)}, expected job ${first.job.id}`);
  const done = await ok(api, "Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken, result: { checked: true } });
  assert(done.job?.state === "JOB_STATE_COMPLETED", `Complete answered ${JSON.stringify(done)}`);
  const second = await ok(api, "Submit", { queue, task: "container.check", payload: { n: 2 }, idempotencyKey: `${queue}-2` });
  return { completed: first.job.id, queued: second.job.id };
}

async function expectJobsKept(container, jobs) {
  const api = await hostPort(container, 8080);
  const { job: completed } = await ok(api, "GetJob", { jobId: jobs.completed });
  assert(completed?.state === "JOB_STATE_COMPLETED", `job ${jobs.completed} is ${completed?.state}, expected JOB_STATE_COMPLETED`);
  assert(JSON.stringify(completed.result) === '{"checked":true}', `job ${jobs.completed} result is ${JSON.stringify(completed.result)}`);
  const { job: queued } = await ok(api, "GetJob", { jobId: jobs.queued });
  assert(queued?.state === "JOB_STATE_QUEUED", `job ${jobs.queued} is ${queued?.state}, expected JOB_STATE_QUEUED`);
}

/** The container's healthcheck is `expected` (the image's HEALTHCHECK, or the compose file's), and running it answers healthy. */
async function expectHealthcheck(container, expected) {
  const config = (await inspect(container)).Config.Healthcheck;
  assert(
    JSON.stringify(config?.Test) === JSON.stringify(expected),
    `the healthcheck is ${JSON.stringify(config?.Test)}, expected ${JSON.stringify(expected)}`,
  );
  const run = await podman(["healthcheck", "run", container], { check: false });
  assert(run.code === 0, `podman healthcheck run ${container}: exit ${run.code} ${run.stdout}${run.stderr}`);
  const health = (await inspect(container)).State.Health?.Status;
  assert(health === "healthy", `health status ${health}`);
}

/** The process runs as node (1000:1000) with no capabilities left over from root; / is read-only; /data is node's, mode 700. */
async function expectUnprivilegedReadOnly(container) {
  const facts = JSON.parse(
    await execNode(
      container,
      `const fs = require("fs");
       let write = "written";
       try { fs.writeFileSync("/app/probe", "x"); } catch (e) { write = e.code; }
       const d = fs.statSync("/data");
       const capEff = fs.readFileSync("/proc/1/status", "utf8").match(/CapEff:\\s*(\\w+)/)[1];
       const uid = fs.readFileSync("/proc/1/status", "utf8").match(/Uid:\\s*(\\d+)/)[1];
       console.log(JSON.stringify({ pid1Uid: +uid, uid: process.getuid(), gid: process.getgid(), write, dataUid: d.uid, dataMode: (d.mode & 0o777).toString(8), capEff }));`,
    ),
  );
  assert(facts.pid1Uid === 1000 && facts.uid === 1000 && facts.gid === 1000, `runs as ${JSON.stringify(facts)}, expected uid/gid 1000`);
  assert(facts.write === "EROFS", `writing /app gave ${facts.write}, expected EROFS (read-only root)`);
  assert(facts.dataUid === 1000 && facts.dataMode === "700", `/data is uid ${facts.dataUid} mode ${facts.dataMode}, expected 1000 and 700`);
  return facts;
}

/** SIGTERM with a long-poll Claim in flight: the server ends it, drains and exits 0 before `stop` would SIGKILL. */
async function expectSigtermStop(container, stopTimeoutSeconds) {
  const api = await hostPort(container, 8080);
  const side = await hostPort(container, 9464);
  const longPoll = call(api, "Claim", { queue: "container-idle", workerId: "container-test", wait: "60s" }, 90_000).catch((e) => ({
    status: 0,
    body: String(e),
  }));
  const deadline = Date.now() + READY_DEADLINE_MS;
  for (;;) {
    const text = await fetch(`${side}/metrics`).then((r) => r.text());
    if (Number(/^leasequeue_claim_waiters(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0) >= 1) break;
    assert(Date.now() < deadline, "the long-poll Claim never showed in leasequeue_claim_waiters");
    await new Promise((r) => setTimeout(r, 100));
  }
  const t0 = Date.now();
  await podman(["stop", "--time", String(stopTimeoutSeconds), container]);
  const seconds = (Date.now() - t0) / 1000;
  const state = (await inspect(container)).State;
  const logs = await logsOf(container);
  assert(state.ExitCode === 0, `exit code ${state.ExitCode} after SIGTERM (137: killed when the ${stopTimeoutSeconds} s ran out)\n${logs}`);
  assert(/"msg":"shutting down"/.test(logs) && /"msg":"stopped"/.test(logs), `no "shutting down" and "stopped" in the logs:\n${logs}`);
  const answered = await longPoll;
  assert(answered.status === 200 || answered.status === 503, `the long-poll Claim got ${answered.status} ${JSON.stringify(answered.body)}`);
  return `exit 0 after ${seconds.toFixed(1)} s (limit ${stopTimeoutSeconds} s), long-poll answered ${answered.status}`;
}

// ---- compose.yaml, one service at a time -----------------------------------------------------

const seconds = (d) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(String(d));
  assert(m, `cannot read the duration ${d}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] ?? "s"];
};

/** `podman run` arguments for one compose service. Host ports become ports the kernel picks on the same address. */
function composeRunArgs(project, name, service, image, composeDir) {
  const args = ["run", "-d", "--name", `${project}_${name}`, "--label", LABEL];
  const handled = new Set(["build", "image"]);
  const take = (key, fn) => {
    if (service[key] === undefined) return;
    handled.add(key);
    fn(service[key]);
  };
  take("restart", (v) => args.push("--restart", v));
  take("user", (v) => args.push("--user", String(v)));
  take("read_only", (v) => v && args.push("--read-only"));
  take("tmpfs", (v) => [v].flat().forEach((t) => args.push("--tmpfs", t)));
  take("cap_drop", (v) => v.forEach((c) => args.push("--cap-drop", c)));
  take("cap_add", (v) => v.forEach((c) => args.push("--cap-add", c)));
  take("security_opt", (v) => v.forEach((o) => args.push("--security-opt", o)));
  take("pids_limit", (v) => args.push("--pids-limit", String(v)));
  take("environment", (v) => {
    const pairs = Array.isArray(v) ? v : Object.entries(v).map(([k, val]) => (val === null ? k : `${k}=${val}`));
    pairs.forEach((p) => args.push("-e", p));
  });
  take("volumes", (v) =>
    v.forEach((vol) => {
      const m = typeof vol === "string" ? vol.split(":") : [vol.source, vol.target, vol.read_only ? "ro" : undefined];
      const type = typeof vol === "string" ? (/^[./~]/.test(m[0]) ? "bind" : "volume") : vol.type;
      const source = type === "volume" ? `${project}_${m[0]}` : resolve(composeDir, m[0]);
      args.push("-v", [source, m[1], m[2]].filter(Boolean).join(":"));
    }),
  );
  take("ports", (v) =>
    v.forEach((p) => {
      const parts = String(p).split(":");
      assert(parts.length === 3, `port ${p}: the test expects ip:host:container (a loopback address)`);
      args.push("-p", `${parts[0]}::${parts[2]}`);
    }),
  );
  take("healthcheck", (h) => {
    const [form, ...rest] = [h.test].flat();
    if (form === "NONE") args.push("--health-cmd", "none");
    else args.push("--health-cmd", form === "CMD" ? JSON.stringify(rest) : rest.join(" "));
    if (h.interval) args.push("--health-interval", h.interval);
    if (h.timeout) args.push("--health-timeout", h.timeout);
    if (h.start_period) args.push("--health-start-period", h.start_period);
    if (h.retries !== undefined) args.push("--health-retries", String(h.retries));
  });
  take("stop_signal", (v) => args.push("--stop-signal", v));
  take("stop_grace_period", (v) => args.push("--stop-timeout", String(Math.ceil(seconds(v)))));
  take("logging", (v) => {
    args.push("--log-driver", v.driver);
    Object.entries(v.options ?? {}).forEach(([k, val]) => args.push("--log-opt", `${k}=${val}`));
  });
  const unknown = Object.keys(service).filter((k) => !handled.has(k));
  assert(unknown.length === 0, `compose service ${name}: keys ${unknown.join(", ")} are not translated by scripts/test-container.mjs`);
  args.push(image);
  if (service.command) args.push(...[service.command].flat());
  return args;
}

// ---- the run ---------------------------------------------------------------------------------

async function main() {
  const missing = ["podman", "runc", "tar"].filter((t) => !which(t));
  if (process.getuid?.() !== 0) missing.unshift("root (podman and debootstrap run as root)");
  if (missing.length > 0) {
    const message = `needs ${missing.join(", ")}: apt-get install podman runc debootstrap`;
    if (CI) throw new Error(message);
    console.log(`skipped: ${message}`);
    return;
  }

  let base;
  await step("base image from Debian packages", async () => {
    base = await ensureBaseImage();
    const version = (await podman(["run", "--rm", base.tag, "node", "--version"])).stdout.trim();
    return `${base.note}, node ${version}`;
  });

  await step("podman build of the Dockerfile", async () => {
    const build = ["build", "--isolation", "chroot", "--format", "docker", "--build-arg", `NODE_IMAGE=${base.tag}`, "-f", "Dockerfile"];
    // The build stage gets a tag of its own, so that its layers (npm ci) stay cached after the
    // prune below, which removes only what earlier runs left untagged (all built on the base image).
    await podman([...build, "--target", "build", "-t", BUILD_STAGE_IMAGE, ROOT], { log: "build.log" });
    await podman([...build, "-t", APP_IMAGE, ROOT], { log: "build.log" });
    await podman(["image", "prune", "-f", "--filter", `label=${LABEL}`], { check: false });
  });

  // ---- the image, as the Dockerfile's header runs it
  const c = `${RUN_ID}-image`;
  const volume = `${RUN_ID}-data`;
  cleanups.push(
    () => podman(["rm", "-f", "-t", "0", c], { check: false }),
    () => podman(["volume", "rm", "-f", volume], { check: false }),
  );
  const runImage = async (name) => {
    await podman(
      ["run", "-d", "--name", name, "--read-only", "-v", `${volume}:/data`, "-p", "127.0.0.1::8080", "-p", "127.0.0.1::9464", APP_IMAGE],
      {
        log: "run.log",
      },
    );
    await waitReady(name);
  };
  await step("image: run --read-only with a /data volume and both ports; /health/ready is 200", async () => {
    await podman(["volume", "create", volume]);
    await runImage(c);
    return `API ${await hostPort(c, 8080)}, side port ${await hostPort(c, 9464)}`;
  });
  await step("image: unprivileged user, read-only root, /data node's and 700", async () => {
    const f = await expectUnprivilegedReadOnly(c);
    return `uid ${f.uid}, / ${f.write}`;
  });
  let jobs;
  await step("image: Submit, Claim and Complete over Connect JSON from the host", async () => {
    jobs = await submitClaimComplete(c, "container-image");
  });
  await step("image: the HEALTHCHECK command answers healthy", async () => {
    const { stdout } = await podman(["image", "inspect", APP_IMAGE, "--format", "{{json .Config.Healthcheck}}"]);
    const test = JSON.parse(stdout)?.Test ?? [];
    assert(test[0] === "CMD" && test[1] === "node", `the image's HEALTHCHECK is ${stdout.trim()} (built without --format docker?)`);
    await expectHealthcheck(c, test);
  });
  await step("image: a restart keeps the jobs", async () => {
    await podman(["restart", "--time", "20", c]);
    await waitReady(c);
    await expectJobsKept(c, jobs);
  });
  await step(`image: SIGTERM stops it within the drain time (${DRAIN_SECONDS} s)`, () => expectSigtermStop(c, DRAIN_SECONDS));
  await step("image: a new container on the same volume finds the jobs", async () => {
    await podman(["rm", c]);
    await runImage(c);
    await expectJobsKept(c, jobs);
    await podman(["rm", "-f", "-t", "0", c]);
  });

  // ---- compose.yaml: each service run from the file
  const composeFile = join(ROOT, "compose.yaml");
  const compose = parseYaml(readFileSync(composeFile, "utf8"));
  const project = `${RUN_ID}-compose`;
  for (const vol of Object.keys(compose.volumes ?? {})) {
    cleanups.push(() => podman(["volume", "rm", "-f", `${project}_${vol}`], { check: false }));
  }
  for (const [name, service] of Object.entries(compose.services)) {
    const ctr = `${project}_${name}`;
    cleanups.unshift(() => podman(["rm", "-f", "-t", "0", ctr], { check: false }));
    await step(`compose ${name}: build, then run with every key of the file; /health/ready is 200`, async () => {
      let image = service.image;
      if (service.build) {
        const context = resolve(ROOT, service.build.context ?? ".");
        const dockerfile = resolve(context, service.build.dockerfile ?? "Dockerfile");
        const buildArgs = Object.entries({ ...service.build.args, NODE_IMAGE: base.tag }).flatMap(([k, v]) => ["--build-arg", `${k}=${v}`]);
        await podman(
          ["build", "--isolation", "chroot", "--format", "docker", ...buildArgs, "-t", COMPOSE_IMAGE, "-f", dockerfile, context],
          {
            log: "build.log",
          },
        );
        image = COMPOSE_IMAGE;
      }
      for (const vol of Object.keys(compose.volumes ?? {})) await podman(["volume", "create", `${project}_${vol}`]);
      await podman(composeRunArgs(project, name, service, image, dirname(composeFile)), { log: "run.log" });
      await waitReady(ctr);
    });
    await step(`compose ${name}: the file's hardening is in force`, async () => {
      const h = (await inspect(ctr)).HostConfig;
      if (service.read_only) assert(h.ReadonlyRootfs === true, "read_only: the root is writable");
      if (service.pids_limit) assert(h.PidsLimit === service.pids_limit, `pids_limit: ${h.PidsLimit}`);
      const f = await expectUnprivilegedReadOnly(ctr);
      if (service.cap_drop?.includes("ALL")) assert(/^0+$/.test(f.capEff), `cap_drop ALL: CapEff ${f.capEff}`);
      return `uid ${f.uid}, CapEff ${f.capEff}, pids ${h.PidsLimit}`;
    });
    let composeJobs;
    await step(`compose ${name}: Submit, Claim and Complete over Connect JSON from the host`, async () => {
      composeJobs = await submitClaimComplete(ctr, "container-compose");
    });
    if (service.healthcheck) {
      await step(`compose ${name}: the file's healthcheck answers healthy`, () =>
        expectHealthcheck(ctr, [service.healthcheck.test].flat()),
      );
    }
    await step(`compose ${name}: a restart keeps the jobs`, async () => {
      await podman(["restart", ctr]);
      await waitReady(ctr);
      await expectJobsKept(ctr, composeJobs);
    });
    await step(`compose ${name}: SIGTERM stops it within the drain time (${DRAIN_SECONDS} s)`, () => expectSigtermStop(ctr, DRAIN_SECONDS));
  }
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  console.error(`\n${err instanceof Error ? err.message : String(err)}`);
} finally {
  for (const cleanup of cleanups) await cleanup();
  rmSync(work, { recursive: true, force: true });
}
const passed = results.filter((r) => r.ok).length;
console.log(`\n${((Date.now() - started) / 1000).toFixed(0)} s; logs in ${LOGS}`);
console.log(`container: ${passed} passed, ${results.length - passed} failed`);
process.exitCode = failed ? 1 : 0;
