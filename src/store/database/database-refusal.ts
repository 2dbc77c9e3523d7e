/**
 * A database operation refused for a reason the operator can act on: the
 * database is in use, its schema is newer than this release, a file is
 * missing or is not what it should be. The command line prints the message
 * alone (no stack) and exits non-zero; a server refuses to start with it.
 */
export type DatabaseRefusalReason =
  /** Another process (a server, a restore, an import) holds the database. */
  | "IN_USE"
  /** The schema version is newer than this release knows. */
  | "SCHEMA_TOO_NEW"
  /** The file is missing, is not a database, is not a LeaseQueue (or litequeue) database, or its directory takes no new file. */
  | "BAD_FILE"
  /** The operation would overwrite something it must not. */
  | "WOULD_OVERWRITE";

export class DatabaseRefusal extends Error {
  constructor(
    readonly reason: DatabaseRefusalReason,
    message: string,
  ) {
    super(message);
    this.name = "DatabaseRefusal";
  }
}
