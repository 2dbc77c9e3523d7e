/** `leasequeue backup <file> [--force]`: a consistent copy of the database, even while a server writes to it. */
import { resolve } from "node:path";
import { backupDatabase } from "../store/sqlite/backup.js";
import { formatBytes, formatJobs, type CommandContext } from "./command.js";

export function backupCommand(ctx: CommandContext): number {
  const started = performance.now();
  const result = backupDatabase(ctx.databasePath, ctx.args[0], { overwrite: ctx.options.force === true });
  ctx.print(`backup written: ${result.path}`);
  ctx.print(`  from:           ${resolve(ctx.databasePath)}`);
  ctx.print(`  size:           ${formatBytes(result.bytes)}`);
  ctx.print(`  schema version: ${result.schemaVersion}`);
  ctx.print(`  jobs:           ${formatJobs(result.jobs)}`);
  ctx.print(`  took:           ${((performance.now() - started) / 1000).toFixed(2)} s`);
  return 0;
}
