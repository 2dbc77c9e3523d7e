#!/usr/bin/env node
/**
 * `npm run test:stress` (docs/development.md "The stress run"): the whole
 * suite, as CI runs it (CI=true, so no test skips for a missing tool),
 * beside a CPU burner on every core: plain child processes that busy-loop,
 * started before the suite and killed after it, whatever happens (also on
 * Ctrl-C or a failure of this script). A suite whose tests wait on events
 * passes here as it does on a quiet machine; a test that waits on time shows
 * up. Prints each failed test with its file and name, the counts and the
 * duration, and exits non-zero on any failure.
 *
 *   npm run test:stress                      the whole suite, one burner per core
 *   npm run test:stress -- --runs=3          three runs in a row, stopping at the first that fails
 *   npm run test:stress -- --burners=4 -- test/service   more burners; vitest's own filters after --
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = fileURLToPath(new URL("..", import.meta.url));
const { values, positionals } = parseArgs({
  options: {
    runs: { type: "string", default: "1" },
    burners: { type: "string", default: String(os.availableParallelism()) },
  },
  allowPositionals: true,
});
const runs = Number(values.runs);
const burnerCount = Number(values.burners);

/** Every burner alive; each is killed on any exit of this process. */
const burners = new Set();
function stopBurners() {
  for (const b of burners) b.kill("SIGKILL");
  burners.clear();
}
process.on("exit", stopBurners);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.once(signal, () => {
    stopBurners();
    process.exit(130);
  });
}

function startBurners() {
  for (let i = 0; i < burnerCount; i++) {
    const b = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
    burners.add(b);
    b.once("exit", () => burners.delete(b));
  }
}

/** One run of the suite beside the burners; resolves with its counts and failures from vitest's JSON report. */
function runSuite(n) {
  const dir = mkdtempSync(join(os.tmpdir(), "leasequeue-stress-"));
  const report = join(dir, "report.json");
  const started = performance.now();
  startBurners();
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        join(root, "node_modules/vitest/vitest.mjs"),
        "run",
        "--reporter=dot",
        "--reporter=json",
        `--outputFile.json=${report}`,
        ...positionals,
      ],
      { cwd: root, stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, CI: "true" } },
    );
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      stopBurners();
      const seconds = (performance.now() - started) / 1000;
      let results;
      try {
        results = JSON.parse(readFileSync(report, "utf8"));
      } catch (err) {
        reject(new Error(`run ${n}: vitest ended (code ${code}, signal ${signal}) without a report: ${err.message}`));
        return;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const failures = [];
      for (const file of results.testResults ?? []) {
        const name = relative(root, file.name);
        const failed = (file.assertionResults ?? []).filter((t) => t.status === "failed");
        for (const t of failed) failures.push({ file: name, test: t.fullName, message: (t.failureMessages ?? []).join("\n") });
        // A file that failed as a whole (an import error, a hook) has no failed case of its own.
        if (failed.length === 0 && file.status === "failed") failures.push({ file: name, test: "(the file)", message: file.message ?? "" });
      }
      resolve({
        n,
        code,
        seconds,
        passed: results.numPassedTests,
        failed: results.numFailedTests,
        skipped: results.numPendingTests + (results.numTodoTests ?? 0),
        failures,
      });
    });
  });
}

const summaries = [];
for (let n = 1; n <= runs; n++) {
  console.log(`\n==> stress run ${n} of ${runs}: the suite with CI=true beside ${burnerCount} CPU burners`);
  const r = await runSuite(n);
  summaries.push(r);
  console.log(
    `\n==> stress run ${n}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped or todo, ${(r.seconds / 60).toFixed(1)} min`,
  );
  for (const f of r.failures) {
    console.log(`FAILED ${f.file} > ${f.test}`);
    const first = f.message.split("\n").find((l) => l.trim() !== "");
    if (first !== undefined) console.log(`       ${first.trim().slice(0, 300)}`);
  }
  if (r.code !== 0 || r.failures.length > 0) break;
}
console.log("\n==> summary");
for (const r of summaries)
  console.log(`run ${r.n}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped or todo, ${(r.seconds / 60).toFixed(1)} min`);
process.exitCode = summaries.every((r) => r.code === 0 && r.failures.length === 0) && summaries.length === runs ? 0 : 1;
