/**
 * `leasequeue restore <backup>`: with the server stopped, replaces the
 * database with a verified copy of the backup; the replaced database is
 * kept beside it.
 */
import { restoreDatabase } from "../store/sqlite/restore.js";
import { formatBytes, formatJobs, type CommandContext } from "./command.js";

export function restoreCommand(ctx: CommandContext): number {
  const result = restoreDatabase(ctx.args[0], ctx.databasePath);
  ctx.print(`restored: ${result.path}`);
  ctx.print(`  from:           ${result.from}`);
  ctx.print(`  size:           ${formatBytes(result.bytes)}`);
  ctx.print(`  schema version: ${result.backup.schemaVersion} (this release: ${result.backup.latestSchemaVersion})`);
  ctx.print(`  jobs:           ${formatJobs(result.backup.jobs)}`);
  for (const note of result.backup.notes) ctx.print(`  note: ${note}`);
  if (result.replacedUnreadable !== undefined) {
    ctx.print(`  note: the replaced file was not a readable database (${result.replacedUnreadable})`);
  }
  ctx.print(
    result.replacedKeptAs === undefined
      ? "  replaced:       nothing (there was no database)"
      : `  replaced:       kept as ${result.replacedKeptAs} (delete it once the restored server works)`,
  );
  return 0;
}
