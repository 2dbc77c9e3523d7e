/**
 * `leasequeue import-litequeue <file> --queue <name> [--task <name>] [--dry-run]`
 * (docs/operations.md "Import from litequeue"): every message of a litequeue
 * database becomes a job of the queue, in one transaction; messages whose id
 * is already a job are skipped, so a second run is a no-op. Any bad row
 * refuses the whole import (each one named, nothing written). The dry run
 * reports the same counts and writes nothing, not even a new database.
 */
import { resolve } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { JOB_STATES, type JobState } from "../domain/job.js";
import { queueName } from "../service/validate.js";
import { DatabaseRefusal } from "../store/database/database-refusal.js";
import { LITEQUEUE_DEFAULT_TASK, mapLitequeueRow, type ImportTarget } from "../store/import/litequeue-mapping.js";
import { openImportTarget, startJobImport } from "../store/sqlite/import-jobs.js";
import { openLitequeueFile, type LitequeueFile } from "../store/sqlite/litequeue-file.js";
import { formatJobs, type CommandContext } from "./command.js";

/** Bad rows named in the refusal; the rest are counted. */
const NAMED_PROBLEMS = 20;

interface Tally {
  imported: Record<JobState, number>;
  present: number;
  presentInAnotherQueue: number;
}

export function importLitequeueCommand(ctx: CommandContext): number {
  let target: ImportTarget;
  try {
    target = importTarget(ctx.options);
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    ctx.complain(`leasequeue import-litequeue: ${err.rawMessage}`);
    return 2;
  }
  const dryRun = ctx.options["dry-run"] === true;
  const source = openLitequeueFile(resolve(ctx.args[0]));
  try {
    if (source.duplicateIds.length > 0) {
      throw new DatabaseRefusal("BAD_FILE", `${source.path}: message_id ${source.duplicateIds.join(", ")} appear(s) in more than one row`);
    }
    const tally = importRows(source, target, ctx.databasePath, dryRun);
    report(ctx, source.path, target, tally, source.rowCount, dryRun);
    return 0;
  } finally {
    source.close();
  }
}

/** --queue and --task, checked by Submit's rules for queue and task names (a ConnectError naming the flag). */
function importTarget(options: CommandContext["options"]): ImportTarget {
  const name = (flag: string, value: string | boolean | undefined, fallback?: string) =>
    queueName(flag, typeof value === "string" ? value : "", fallback);
  return { queue: name("--queue", options.queue), task: name("--task", options.task, LITEQUEUE_DEFAULT_TASK) };
}

/**
 * Two passes over the same snapshot of the litequeue file: the first only
 * maps every row, so that a bad row refuses the import before the database
 * is opened (nothing is written, not even a new empty database); the second
 * maps again and stores.
 */
function importRows(source: LitequeueFile, target: ImportTarget, databasePath: string, dryRun: boolean): Tally {
  const bad = { rows: 0, problems: [] as string[] };
  for (const row of source.rows()) {
    const mapped = mapLitequeueRow(row, target);
    if (mapped.ok) continue;
    bad.rows++;
    if (bad.problems.length < NAMED_PROBLEMS) bad.problems.push(mapped.problem);
  }
  if (bad.rows > 0) throw badRowsRefusal(source.path, bad);

  const tally: Tally = {
    imported: Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>,
    present: 0,
    presentInAnotherQueue: 0,
  };
  const database = openImportTarget(databasePath, { write: !dryRun });
  try {
    const jobs = startJobImport(database.db, { write: !dryRun });
    try {
      for (const row of source.rows()) {
        const mapped = mapLitequeueRow(row, target);
        if (!mapped.ok) throw new Error(`${source.path} changed during the import: ${mapped.problem}`);
        const outcome = jobs.add(mapped.job, mapped.event);
        if (outcome === "imported") tally.imported[mapped.job.state]++;
        else tally.present++;
        if (outcome === "present-in-another-queue") tally.presentInAnotherQueue++;
      }
      jobs.commit();
      return tally;
    } finally {
      jobs.abort();
    }
  } finally {
    database.release();
  }
}

function badRowsRefusal(path: string, bad: { rows: number; problems: string[] }): DatabaseRefusal {
  const more = bad.rows - bad.problems.length;
  const lines = [...bad.problems.map((p) => `  - ${p}`), ...(more > 0 ? [`  - and ${more} more bad row(s)`] : [])];
  return new DatabaseRefusal("BAD_FILE", `${path}: ${bad.rows} row(s) cannot be imported; nothing was written:\n${lines.join("\n")}`);
}

function report(ctx: CommandContext, path: string, target: ImportTarget, tally: Tally, rows: number, dryRun: boolean): void {
  ctx.print(`litequeue import${dryRun ? " (dry run)" : ""}: ${path}`);
  ctx.print(`  into:            ${resolve(ctx.databasePath)}, queue "${target.queue}", task "${target.task}"`);
  ctx.print(`  rows:            ${rows}`);
  ctx.print(`  ${dryRun ? "would import:   " : "imported:       "} ${formatJobs(tally.imported)}`);
  ctx.print(
    `  already present: ${tally.present}${tally.presentInAnotherQueue > 0 ? ` (${tally.presentInAnotherQueue} of them in another queue)` : ""}`,
  );
  if (dryRun) ctx.print("dry run: nothing was written");
}
