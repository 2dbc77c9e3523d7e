/**
 * The schema-version rules, the same for every engine: a release applies
 * its migrations in order to an older database (so a newer server migrates
 * an older database at start), and refuses a database whose version is
 * newer than the last migration it knows (an older server must not write
 * to a schema it does not understand). Version 0 means no migration was
 * ever applied: a new, empty database.
 */
import { DatabaseRefusal } from "./database-refusal.js";

/** Why a database at `found` cannot be used by a release that knows up to `latest`, or undefined when it can. */
export function schemaTooNewMessage(path: string, found: number, latest: number): string | undefined {
  if (found <= latest) return undefined;
  return (
    `${path} has schema version ${found}, newer than this LeaseQueue release knows (up to ${latest}): ` +
    `a newer release migrated it. Run that release (or a later one), or restore a backup taken before the upgrade.`
  );
}

/** Throws DatabaseRefusal (SCHEMA_TOO_NEW) when the database is newer than this release. */
export function assertSchemaNotNewer(path: string, found: number, latest: number): void {
  const message = schemaTooNewMessage(path, found, latest);
  if (message !== undefined) throw new DatabaseRefusal("SCHEMA_TOO_NEW", message);
}
