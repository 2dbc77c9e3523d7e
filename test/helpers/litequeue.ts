/**
 * litequeue databases for the import tests, built with litequeue's own
 * schema (litequeue 0.11, src/litequeue/__init__.py): table "Queue", a unique
 * index on message_id and an index on (status, message_id), WAL mode, times
 * in nanoseconds.
 */
import Database from "better-sqlite3";

export const LITEQUEUE_SCHEMA = `
CREATE TABLE IF NOT EXISTS "Queue"
(
  data       TEXT NOT NULL
  , message_id TEXT NOT NULL
  , status     INTEGER NOT NULL
  , in_time    INTEGER NOT NULL
  , lock_time  INTEGER
  , done_time  INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS "Queue_message_id_unique_idx" ON "Queue"(message_id);
CREATE INDEX IF NOT EXISTS "Queue_status_message_id_idx" ON "Queue"(status, message_id);
`;

/** The same columns without the NOT NULL constraints, as a hand-made or damaged table may have them. */
export const LOOSE_LITEQUEUE_SCHEMA = `
CREATE TABLE "Queue" (data TEXT, message_id TEXT, status INTEGER, in_time INTEGER, lock_time INTEGER, done_time INTEGER);
`;

export interface LitequeueMessage {
  data: unknown;
  message_id: unknown;
  status: unknown;
  in_time: unknown;
  lock_time?: unknown;
  done_time?: unknown;
}

export const READY = 0;
export const LOCKED = 1;
export const DONE = 2;
export const FAILED = 3;

/** Writes `messages` (in this order, so rowid order) into a new litequeue database at `path`. */
export function writeLitequeueFile(path: string, messages: LitequeueMessage[], schema = LITEQUEUE_SCHEMA): void {
  const db = new Database(path);
  try {
    db.pragma("journal_mode = WAL");
    db.exec(schema);
    const insert = db.prepare(`INSERT INTO "Queue" (data, message_id, status, in_time, lock_time, done_time) VALUES (?, ?, ?, ?, ?, ?)`);
    db.transaction(() => {
      for (const m of messages) insert.run(m.data, m.message_id, m.status, m.in_time, m.lock_time ?? null, m.done_time ?? null);
    })();
  } finally {
    db.close();
  }
}
