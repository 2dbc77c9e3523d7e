/**
 * `leasequeue check [--quick]`: integrity, schema version and job counts of
 * the database (a live one too: it reads one snapshot and writes nothing).
 * Exit 0 when nothing is wrong, 1 with one line on stderr per problem.
 */
import { resolve } from "node:path";
import { fileBytes } from "../store/sqlite/database-file.js";
import { inspectDatabase } from "../store/sqlite/inspect.js";
import { formatBytes, formatJobs, type CommandContext } from "./command.js";

export function checkCommand(ctx: CommandContext): number {
  const quick = ctx.options.quick === true;
  const path = resolve(ctx.databasePath);
  const report = inspectDatabase(path, { quick });
  const integrity = report.integrityProblems.length === 0 ? "ok" : `${report.integrityProblems.length} problem(s)`;
  const mismatches = report.mismatches.length;
  ctx.print(`database:       ${path}`);
  ctx.print(`  size:           ${formatBytes(fileBytes(path))} (+ ${formatBytes(fileBytes(`${path}-wal`))} of WAL)`);
  ctx.print(`  schema version: ${report.schemaVersion} (this release: ${report.latestSchemaVersion})`);
  ctx.print(`  integrity:      ${integrity} (${quick ? "quick_check" : "integrity_check"})`);
  ctx.print(`  jobs:           ${formatJobs(report.jobs)} in ${report.queues} queue(s)`);
  ctx.print(`  job_counts:     ${mismatches === 0 ? "match the jobs" : `${mismatches} count(s) differ from the jobs`}`);
  ctx.print(`  events:         ${report.events}`);
  for (const note of report.notes) ctx.print(`  note: ${note}`);
  for (const problem of report.problems) ctx.complain(`leasequeue check: ${problem}`);
  ctx.print(report.problems.length === 0 ? "result: ok" : `result: ${report.problems.length} problem(s)`);
  return report.problems.length === 0 ? 0 : 1;
}
