#!/usr/bin/env node
/**
 * Two builds of the server under the same bench, in alternating runs: how a
 * change is shown to pay (docs/performance.md "Running the benchmark"), and
 * how a regression is bisected. Each revision is checked out into a worktree
 * under <tmpdir>/leasequeue-builds/<commit> (outside the checkout, where the
 * test runner, tsc and eslint would find its files; node_modules linked from
 * this checkout) and built once; then `bench/run.mjs` of THIS checkout runs one scenario against
 * each build in turn (LEASEQUEUE_BENCH_SERVER), A B A B ..., so a drift of
 * the machine falls on both. Prints every run and, pair by pair, the ratio
 * A/B of end-to-end jobs/s and of the server's CPU per job, with the medians.
 *
 *   node bench/compare-builds.mjs --a=HEAD --b=4d101b5 [--pairs=3] [--scenario=b]
 *        [--jobs=20000] [--engine=sqlite|postgres]
 *
 * `--a=.` is this checkout as it is (built with `npm run build` first).
 * The builds stay for the next comparison; `node bench/compare-builds.mjs
 * --clean` removes them and their worktrees.
 * Needs git, and a revision whose server takes `serve --db --port 0
 * --metrics-port 0` (every one since the first release).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const BUILDS = join(tmpdir(), "leasequeue-builds");

const { values: args } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    pairs: { type: "string", default: "3" },
    scenario: { type: "string", default: "b" },
    jobs: { type: "string", default: "20000" },
    engine: { type: "string", default: "sqlite" },
    clean: { type: "boolean", default: false },
    payload: { type: "string", default: "small" },
  },
});
const git = (...a) => execFileSync("git", a, { cwd: ROOT, encoding: "utf8" }).trim();

if (args.clean) {
  for (const line of git("worktree", "list", "--porcelain").split("\n")) {
    const dir = line.startsWith("worktree ") ? line.slice("worktree ".length) : undefined;
    if (dir !== undefined && dir.startsWith(BUILDS + "/")) {
      git("worktree", "remove", "--force", dir);
      console.log(`removed ${dir}`);
    }
  }
  rmSync(BUILDS, { recursive: true, force: true });
  process.exit(0);
}
if (args.a === undefined || args.b === undefined) {
  console.error(
    "usage: node bench/compare-builds.mjs --a=REV --b=REV [--pairs=3] [--scenario=b] [--jobs=20000] [--engine=sqlite] [--payload=small|order]",
  );
  process.exit(2);
}
const pairs = Number(args.pairs);
if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`--pairs: a whole number of at least 1, not "${args.pairs}"`);
if (!["sqlite", "postgres"].includes(args.engine)) throw new Error(`--engine: "sqlite" or "postgres", not "${args.engine}"`);

/** The server entry point of a revision, built in its worktree (once), or of this checkout for ".". */
function serverOf(rev) {
  if (rev === ".") return { label: "this checkout", bin: join(ROOT, "bin", "leasequeue.js") };
  const commit = git("rev-parse", "--short=9", `${rev}^{commit}`);
  const dir = join(BUILDS, commit);
  const bin = join(dir, "bin", "leasequeue.js");
  if (!existsSync(join(dir, "dist"))) {
    mkdirSync(BUILDS, { recursive: true });
    if (!existsSync(dir)) git("worktree", "add", "--detach", dir, commit);
    if (!existsSync(join(dir, "node_modules"))) symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
    console.log(`building ${rev} (${commit}) in ${dir}`);
    const built = spawnSync("npm", ["run", "build", "--silent"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
    if (built.status !== 0) throw new Error(`npm run build failed in ${dir}`);
  }
  return { label: `${rev} (${commit})`, bin };
}

/** One run of the scenario against `server`: its row of the bench's JSON. */
function run(server) {
  const out = join(tmpdir(), `compare-builds-${process.pid}-${Date.now()}.json`);
  const r = spawnSync(
    process.execPath,
    [
      join(ROOT, "bench", "run.mjs"),
      "--quick",
      "--no-peers",
      `--scenarios=${args.scenario}`,
      `--jobs=${args.jobs}`,
      `--engines=${args.engine}`,
      `--payload=${args.payload}`,
      "--no-taskset",
      `--out=${out}`,
    ],
    { cwd: ROOT, env: { ...process.env, LEASEQUEUE_BENCH_SERVER: server.bin }, encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`bench/run.mjs failed against ${server.label}:\n${r.stderr.slice(-2000)}`);
  const row = JSON.parse(readFileSync(out, "utf8")).rows[0];
  rmSync(out, { force: true });
  if (!row.check?.ok) throw new Error(`${server.label}: not every job exactly once: ${JSON.stringify(row.check)}`);
  return { jobsPerSec: row.e2eJobsPerSec, serverMsPerJob: row.serverCpuMsPerJob };
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const a = serverOf(args.a);
const b = serverOf(args.b);
console.log(`A = ${a.label}, B = ${b.label}: (${args.scenario}) on ${args.engine}, ${args.jobs} jobs, ${pairs} pairs, A first`);
const ratios = [];
for (let i = 1; i <= pairs; i++) {
  const ra = run(a);
  const rb = run(b);
  const pair = { jobs: ra.jobsPerSec / rb.jobsPerSec, cpu: ra.serverMsPerJob / rb.serverMsPerJob };
  ratios.push(pair);
  console.log(
    `pair ${i}: A ${Math.round(ra.jobsPerSec)} jobs/s ${ra.serverMsPerJob.toFixed(3)} ms/job | ` +
      `B ${Math.round(rb.jobsPerSec)} jobs/s ${rb.serverMsPerJob.toFixed(3)} ms/job | ` +
      `A/B jobs/s ${pair.jobs.toFixed(2)}, server CPU per job ${pair.cpu.toFixed(2)}`,
  );
}
console.log(
  `median A/B: jobs/s ${median(ratios.map((r) => r.jobs)).toFixed(2)}, server CPU per job ${median(ratios.map((r) => r.cpu)).toFixed(2)} ` +
    `(A ahead on jobs/s in ${ratios.filter((r) => r.jobs > 1).length} of ${pairs} pairs)`,
);
