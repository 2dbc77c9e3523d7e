/**
 * Reads a litequeue database (its table `Queue`, see store/import/litequeue-mapping.ts)
 * without writing to it, in one read transaction, so the rows and the
 * duplicate check see the same snapshot even if a litequeue producer still
 * writes. Integers are read as bigint: nanosecond times exceed 2^53.
 */
import type Database from "better-sqlite3";
import { DatabaseRefusal } from "../database/database-refusal.js";
import type { LitequeueRow } from "../import/litequeue-mapping.js";
import { openExistingReadOnly } from "./database-file.js";
import { LITEQUEUE_SQL } from "./sql.js";

const COLUMNS = ["data", "message_id", "status", "in_time", "lock_time", "done_time"] as const;

export interface LitequeueFile {
  readonly path: string;
  /** Rows in the table. */
  readonly rowCount: number;
  /** Ids (lower-cased) held by more than one row, at most 10. */
  readonly duplicateIds: string[];
  /** The rows in insertion (rowid) order, read as they are needed. */
  rows(): IterableIterator<LitequeueRow>;
  close(): void;
}

export function openLitequeueFile(path: string): LitequeueFile {
  const db = openExistingReadOnly(path, "litequeue file");
  try {
    assertLitequeueTable(db, path);
    db.exec("BEGIN");
    const rowCount = Number((db.prepare(LITEQUEUE_SQL.rowCount).safeIntegers(true).get() as { n: bigint }).n);
    const duplicateIds = (db.prepare(LITEQUEUE_SQL.duplicateIds).all() as Array<{ id: string }>).map((r) => r.id);
    const rowsStatement = db.prepare(LITEQUEUE_SQL.rows).safeIntegers(true).raw(true);
    return {
      path,
      rowCount,
      duplicateIds,
      *rows() {
        for (const r of rowsStatement.iterate() as IterableIterator<unknown[]>) {
          yield { rowid: r[0] as bigint, data: r[1], messageId: r[2], status: r[3], inTime: r[4], lockTime: r[5], doneTime: r[6] };
        }
      },
      close() {
        db.close();
      },
    };
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Refuses a file whose `Queue` is not litequeue's table before any row is
 * read: a view (even one over a dropped table), a virtual or WITHOUT ROWID
 * table (the rows are read in rowid order), or a table without litequeue's
 * columns. Each refusal names what litequeue's table has.
 */
function assertLitequeueTable(db: Database.Database, path: string): void {
  const expected = `litequeue's table "Queue" with the columns ${COLUMNS.join(", ")}`;
  const refuse = (found: string) => new DatabaseRefusal("BAD_FILE", `${path} is not a litequeue database: ${found}; expected ${expected}`);
  const queue = db.prepare(LITEQUEUE_SQL.queueKind).get() as { type: string; wr: number } | undefined;
  if (queue === undefined) throw refuse('it has no table "Queue"');
  if (queue.type !== "table") throw refuse(`its "Queue" is a ${queue.type === "virtual" ? "virtual table" : queue.type}, not a table`);
  if (queue.wr !== 0) throw refuse('its "Queue" is a WITHOUT ROWID table');
  const present = new Set((db.prepare(LITEQUEUE_SQL.columns).all() as Array<{ name: string }>).map((c) => c.name));
  const missing = COLUMNS.filter((c) => !present.has(c));
  if (missing.length > 0) throw refuse(`its table "Queue" lacks the column(s) ${missing.join(", ")}`);
}
