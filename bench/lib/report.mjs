/**
 * The printed table of a bench run: every row with its ratio to the ceiling
 * that bounds it (unary: do-nothing calls/s / 3, since a job needs a Submit,
 * a Claim and a Complete, or / 2 for a row whose Claims carry the Completes;
 * batched: the in-process SQLite loop at 100 jobs per commit), its CPU per
 * job in the server, the clients and the database's processes and their
 * total, then the ceilings and what each row actually ran.
 */

/** The ceilings a row is measured against: {enqueue, e2e, name}. */
export function ceilingFor(row, ceilings) {
  if (row.kind === "unary") {
    const calls = ceilings.noopGrpc.callsPerSec;
    const perJob = row.callsPerJob ?? 3;
    return { enqueue: calls, e2e: calls / perJob, name: `do-nothing gRPC calls/s (enqueue) and calls/s / ${perJob} (end to end)` };
  }
  const loop = ceilings.sqliteBatch100.jobsPerSec;
  return { enqueue: loop, e2e: loop, name: "in-process SQLite loop, 100 jobs per commit" };
}

const f0 = (x) => (x === null || x === undefined || Number.isNaN(x) ? "-" : Math.round(x).toLocaleString("en"));
const f1 = (x) => (x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(1));
const f2 = (x) => (x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(2));
const f3 = (x) => (x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(3));

/** Database CPU ms/job: "in srv" where the database runs inside the server (SQLite), "-" in runs from before it was measured. */
function dbCell(r, inServer) {
  if (r.dbCpuMsPerJob === undefined) return "-";
  return r.engine === "sqlite" ? inServer : f2(r.dbCpuMsPerJob);
}

function table(header, rows) {
  const widths = header.map((h, k) => Math.max(h.length, ...rows.map((r) => String(r[k]).length)));
  const line = (cells) => cells.map((c, k) => (k < 2 ? String(c).padEnd(widths[k]) : String(c).padStart(widths[k]))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/**
 * Scenario (e) against (b) of the same run, per engine (bench/run.mjs header
 * comment): each run of either, their means and the ratios (e)/(b) of the
 * claim cost per job (server CPU, plus the database's on PostgreSQL, per
 * job) and of the time per job ((b)'s jobs/s over (e)'s). Over the claim
 * phases when every (b) row has one (--submit-first), else over whole job
 * lives (submit + claim + complete, (b)'s overlapped). Pinned rows and runs
 * that did not complete every job exactly once are left out.
 */
export function compareGroupsToBatched(rows) {
  const out = [];
  const eligible = (r) => r.system?.startsWith("leasequeue") && r.serverCpus === undefined && r.outcome === "handled" && r.check?.ok;
  for (const engine of [...new Set(rows.filter((r) => r.key === "e").map((r) => r.engine))]) {
    const b = rows.filter((r) => r.key === "b" && r.engine === engine && eligible(r));
    const e = rows.filter((r) => r.key === "e" && r.engine === engine && eligible(r));
    if (b.length === 0 || e.length === 0) {
      out.push({ engine, missing: b.length === 0 ? "no (b) row of this engine completed every job exactly once" : "no (e) row completed" });
      continue;
    }
    const claimPhases = b.every((r) => r.claimPhase !== undefined);
    const figures = (r) => {
      const p = claimPhases ? r.claimPhase : r;
      return {
        scenario: r.scenario,
        jobsPerSec: claimPhases ? p.jobsPerSec : r.e2eJobsPerSec,
        costMsPerJob: p.serverCpuMsPerJob + (p.dbCpuMsPerJob ?? 0),
        totalCpuMsPerJob: p.totalCpuMsPerJob,
      };
    };
    const mean = (xs, f) => xs.reduce((a, x) => a + f(x), 0) / xs.length;
    const side = (list) => {
      const runs = list.map(figures);
      return {
        runs,
        jobsPerSec: mean(runs, (x) => x.jobsPerSec),
        costMsPerJob: mean(runs, (x) => x.costMsPerJob),
        totalCpuMsPerJob: mean(runs, (x) => x.totalCpuMsPerJob),
      };
    };
    const sb = side(b);
    const se = side(e);
    const costRatio = se.costMsPerJob / sb.costMsPerJob;
    const timeRatio = sb.jobsPerSec / se.jobsPerSec;
    out.push({
      engine,
      basis: claimPhases
        ? "claim phase: the queue resumed (every job submitted) to the last completion"
        : "whole job life: first submit to last completion, (b)'s submits and claims overlapped, (e)'s submit phase then claim phase",
      // Without claim phases the cost is a whole job's, not a claim's.
      costName: claimPhases ? "claim cost" : "cost",
      cost: `server CPU${engine === "sqlite" ? "" : " + database CPU"} ms per job${claimPhases ? " over the claim phase" : ", whole job life"}`,
      b: sb,
      e: se,
      costRatio,
      timeRatio,
      groupsAtClaimStart: e.map((r) => r.claimPhase?.gate?.groups ?? null),
      target: "claim cost per job at most 2x (b)'s",
      // The target is about claims: judged only over claim phases.
      met: claimPhases ? costRatio <= 2 && timeRatio <= 2 : null,
    });
  }
  return out;
}

function verdict(cmp) {
  if (cmp.met === null) return "not judged (whole job lives; run with --submit-first for claim phases)";
  return cmp.met ? "met" : "NOT met";
}

/** Adds ratio fields to each row (in place) and prints the report. */
export function printReport(report) {
  const c = report.ceilings;
  const rows = report.rows.map((r) => {
    const ceil = ceilingFor(r, c);
    r.ratio = {
      ceiling: ceil.name,
      enqueue: r.enqueueJobsPerSec === null ? null : r.enqueueJobsPerSec / ceil.enqueue,
      e2e: r.e2eJobsPerSec === null ? null : r.e2eJobsPerSec / ceil.e2e,
    };
    const e2e = r.e2eJobsPerSec !== null ? f0(r.e2eJobsPerSec) : `${f0(r.partialJobsPerSec)} (partial)`;
    const check =
      r.outcome === "handled"
        ? r.check.ok
          ? "exactly once"
          : `FAILED ${JSON.stringify(r.check)}`
        : r.outcome === "store-timeout"
          ? `STORE ${r.storeCheck?.done}/${report.sizes.jobs}`
          : `TIMEOUT ${r.check.completions}/${report.sizes.jobs}`;
    return [
      r.scenario,
      r.system + (r.version ? ` ${r.version}` : ""),
      f0(r.enqueueJobsPerSec),
      f2(r.ratio.enqueue),
      e2e,
      f3(r.ratio.e2e),
      f1(r.latency?.p50),
      f1(r.latency?.p99),
      f1(r.serverCpuSeconds),
      f2(r.serverCpuMsPerJob),
      f2(r.clientCpuMsPerJob),
      dbCell(r, "in srv"),
      f2(r.totalCpuMsPerJob),
      r.peakRssMiB === null ? "-" : f0(r.peakRssMiB),
      check,
    ];
  });
  const m = report.machine;
  console.log(
    `\nLeaseQueue bench (${report.mode}), ${report.startedAt}: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB, ${m.disk}, Node ${m.node}, load at start ${m.loadAverage.join(" ")}`,
  );
  console.log(
    `${report.sizes.jobs} jobs ${report.payload === "order" ? '{"i": n, ...an order of about 700 bytes}' : '{"i": n}'}; 8 producers (2 processes), 16 worker slots (4 processes); ${report.transport}`,
  );
  console.log(
    "CPU per job over the throughput phase: srv = the LeaseQueue server (none for the peers: they are libraries in the clients), client = the 6 client processes, db = the database's processes (every postgres process, redis-server or RabbitMQ's beam.smp; SQLite is in the server), total = their sum\n",
  );
  console.log(
    table(
      [
        "scenario",
        "system",
        "enqueue/s",
        "÷ceil",
        "e2e jobs/s",
        "÷ceil",
        "p50 ms",
        "p99 ms",
        "srv CPU s",
        "srv ms/job",
        "client ms/job",
        "db ms/job",
        "total ms/job",
        "peak RSS MiB",
        "check",
      ],
      rows,
    ),
  );
  console.log("\nCeilings (same run):");
  console.log(
    `  in-process SQLite loop, 1 job per commit:    ${f0(c.sqliteBatch1.jobsPerSec)} jobs/s (${c.sqliteBatch1.jobs} jobs, ${c.sqliteBatch1.commits} commits)`,
  );
  console.log(
    `  in-process SQLite loop, 100 jobs per commit: ${f0(c.sqliteBatch100.jobsPerSec)} jobs/s (${c.sqliteBatch100.jobs} jobs, ${c.sqliteBatch100.commits} commits)`,
  );
  console.log(
    `  do-nothing gRPC unary handler, 64 callers:   ${f0(c.noopGrpc.callsPerSec)} calls/s (÷3 = ${f0(c.noopGrpc.callsPerSec / 3)} jobs/s), server ${f2(c.noopGrpc.serverCpuMsPerCall)} ms CPU/call`,
  );
  console.log(
    "\nWhat each row ran (÷ceil: unary rows vs do-nothing calls/s (enqueue) and calls/s / calls per job, 3 or 2 with acks (e2e); batched rows vs the 100-per-commit loop):",
  );
  for (const r of report.rows) {
    const extra = [
      r.submitBatchView ? `SubmitBatch returns ${r.submitBatchView}` : null,
      r.latencyOn ? `latency: ${r.latencyOn}` : null,
      r.watchers
        ? `${r.watchers.streams} WatchEvents on a quiet queue over ${r.watchers.connections} connections, ${r.watchers.eventsReceived} events received`
        : null,
      r.historyJobs ? `${r.historyJobs.toLocaleString("en")} completed jobs (+3 events each) in the file at start` : null,
      r.batchedRpcsNotUsed ? `descriptor also has ${r.batchedRpcsNotUsed.join(", ")}, which no bench driver uses yet` : null,
      r.serverCpus ? `server under ${r.serverCpus.taskset} (Cpus_allowed_list ${r.serverCpus.cpusAllowed}), clients unpinned` : null,
      r.fair ? `fair queue (UpdateQueue), job i in group g<i mod ${r.groups}>` : null,
      r.claimPhase
        ? `submitted into the paused queue, then resumed: claim phase ${f0(r.claimPhase.jobsPerSec)} jobs/s, ${f3(r.claimPhase.serverCpuMsPerJob)} ms server CPU/job` +
          `${r.engine === "sqlite" ? "" : ` + ${f3(r.claimPhase.dbCpuMsPerJob)} db`}, ${f3(r.claimPhase.totalCpuMsPerJob)} total` +
          `${r.claimPhase.gate?.groups ? `; ${f0(r.claimPhase.gate.groups)} groups held the ${f0(r.claimPhase.gate.queued)} queued jobs at the resume` : ""}`
        : null,
      r.dbCpu?.processes && r.engine !== "sqlite" ? `db CPU: ${r.dbCpu.processes}` : null,
      r.dbCpu?.otherBackendsMs > 0
        ? `left out of db CPU: ${f0(r.dbCpu.otherBackendsMs)} ms of ${r.dbCpu.otherBackends} other PostgreSQL connection${r.dbCpu.otherBackends === 1 ? "" : "s"}`
        : null,
    ]
      .filter(Boolean)
      .join("; ");
    console.log(`  ${r.scenario} / ${r.system}: ${r.api}${extra ? ` (${extra})` : ""}`);
  }
  for (const s of report.skipped) console.log(`  skipped ${s.system}: ${s.skipped}`);
  report.groupsComparison = compareGroupsToBatched(report.rows);
  for (const cmp of report.groupsComparison) {
    if (cmp.missing !== undefined) {
      console.log(`\n(e) against (b), ${cmp.engine}: ${cmp.missing}`);
      continue;
    }
    console.log(`\n(e) against (b), same run, ${cmp.engine}; over the ${cmp.basis}; ${cmp.costName} = ${cmp.cost}:`);
    for (const [name, s] of [
      ["(b)", cmp.b],
      ["(e)", cmp.e],
    ]) {
      s.runs.forEach((x, k) =>
        console.log(
          `  ${name} run ${k + 1}: ${f0(x.jobsPerSec)} jobs/s, ${cmp.costName} ${f3(x.costMsPerJob)} ms/job, total CPU ${f3(x.totalCpuMsPerJob)} ms/job`,
        ),
      );
      console.log(
        `  ${name} mean:  ${f0(s.jobsPerSec)} jobs/s, ${cmp.costName} ${f3(s.costMsPerJob)} ms/job, total CPU ${f3(s.totalCpuMsPerJob)} ms/job`,
      );
    }
    console.log(
      `  (e)/(b): ${cmp.costName} per job ${f2(cmp.costRatio)}x, time per job ((b) jobs/s / (e) jobs/s) ${f2(cmp.timeRatio)}x; ${cmp.target}: ${verdict(cmp)}` +
        `; groups holding jobs when (e)'s claims started: ${cmp.groupsAtClaimStart.map((g) => f0(g)).join(", ")}`,
    );
  }
  if (report.cpuProfile !== undefined) {
    console.log(
      `\nServer CPU profile, ${report.cpuProfile.scenario}; idle ${((report.cpuProfile.idleShare ?? 0) * 100).toFixed(0)}% of ${report.cpuProfile.totalMs} ms; top self time, share of busy time:`,
    );
    const printTop = (top) => {
      for (const e of top.slice(0, 15)) console.log(`  ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.fn}  ${e.where}`);
    };
    printTop(report.cpuProfile.top);
    console.log("  by area:");
    for (const a of report.cpuProfile.byArea ?? []) console.log(`  ${(a.share * 100).toFixed(1).padStart(5)}%  ${a.area}`);
    const budget = report.cpuProfile.budget;
    if (budget !== undefined) {
      const kib = budget.allocatedBytesPerJob === undefined ? "-" : (budget.allocatedBytesPerJob / 1024).toFixed(1);
      console.log(
        `\n  CPU budget per job, by layer (every thread; profiled run, so above the table's figure): ${f3(budget.serverCpuMsPerJob)} ms/job, ${kib} KiB allocated per job`,
      );
      for (const l of budget.layers) console.log(`  ${l.msPerJob.toFixed(4).padStart(8)} ms  ${l.layer}`);
    }
    for (const w of report.cpuProfile.workers ?? []) {
      console.log(`\n  worker thread ${w.thread}: idle ${((w.idleShare ?? 0) * 100).toFixed(0)}% of ${w.totalMs} ms; top self time:`);
      printTop(w.top);
    }
  }
}

/** The same table as Markdown, for docs/performance.md (ratios must already be on the rows: run printReport first or read a saved JSON). */
export function markdownReport(report) {
  const c = report.ceilings;
  const lines = [
    "| scenario | system | API | enqueue jobs/s | ÷ ceiling | end-to-end jobs/s | ÷ ceiling | submit-to-lease p50 / p99 ms | server CPU s (ms/job) | client CPU ms/job | database CPU ms/job | total CPU ms/job | peak RSS MiB | exactly once |",
    "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
  ];
  for (const r of report.rows) {
    const e2e =
      r.e2eJobsPerSec !== null
        ? f0(r.e2eJobsPerSec)
        : `${f0(r.partialJobsPerSec)} (${r.check.completions} of ${report.sizes.jobs} in ${report.sizes.peerTimeoutMs / 1000} s)`;
    const check = r.outcome === "handled" ? (r.check.ok ? "yes" : `**no** ${JSON.stringify(r.check)}`) : "timed out";
    lines.push(
      `| ${r.scenario} | ${r.system}${r.version ? ` ${r.version}` : ""} | ${r.api} | ${f0(r.enqueueJobsPerSec)} | ${f2(r.ratio?.enqueue)} | ${e2e} | ${f3(r.ratio?.e2e)} | ${f1(r.latency?.p50)} / ${f1(r.latency?.p99)} | ${r.serverCpuMsPerJob === null ? "-" : `${f1(r.serverCpuSeconds)} (${f2(r.serverCpuMsPerJob)})`} | ${f2(r.clientCpuMsPerJob)} | ${dbCell(r, "in server")} | ${f2(r.totalCpuMsPerJob)} | ${r.peakRssMiB === null ? "-" : f0(r.peakRssMiB)} | ${check} |`,
    );
  }
  for (const cmp of compareGroupsToBatched(report.rows)) {
    if (cmp.missing !== undefined) continue;
    lines.push(
      "",
      `(e) against (b), ${cmp.engine}, over the ${cmp.basis}; ${cmp.costName} = ${cmp.cost}:`,
      "",
      `| scenario | run | jobs/s | ${cmp.costName} ms/job | total CPU ms/job |`,
      "|---|--:|--:|--:|--:|",
    );
    for (const s of [cmp.b, cmp.e]) {
      s.runs.forEach((x, k) =>
        lines.push(`| ${x.scenario} | ${k + 1} | ${f0(x.jobsPerSec)} | ${f3(x.costMsPerJob)} | ${f3(x.totalCpuMsPerJob)} |`),
      );
      lines.push(`| ${s.runs[0].scenario} | mean | ${f0(s.jobsPerSec)} | ${f3(s.costMsPerJob)} | ${f3(s.totalCpuMsPerJob)} |`);
    }
    lines.push(
      "",
      `(e)/(b): ${cmp.costName} per job ${f2(cmp.costRatio)}x, time per job ${f2(cmp.timeRatio)}x (${cmp.target}: ${verdict(cmp)}).`,
    );
  }
  lines.push(
    "",
    "| ceiling (same run) | figure |",
    "|---|--:|",
    `| in-process SQLite loop, 1 job per commit (${c.sqliteBatch1.jobs} jobs) | ${f0(c.sqliteBatch1.jobsPerSec)} jobs/s |`,
    `| in-process SQLite loop, 100 jobs per commit (${c.sqliteBatch100.jobs} jobs) | ${f0(c.sqliteBatch100.jobsPerSec)} jobs/s |`,
    `| do-nothing gRPC unary handler, 64 callers (${c.noopGrpc.calls} calls) | ${f0(c.noopGrpc.callsPerSec)} calls/s (÷ 3 = ${f0(c.noopGrpc.callsPerSec / 3)}); ${f2(c.noopGrpc.serverCpuMsPerCall)} ms server CPU per call |`,
  );
  return lines.join("\n");
}
