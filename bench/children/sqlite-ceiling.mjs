#!/usr/bin/env node
/**
 * The storage ceiling: insert -> claim -> complete of `jobs` jobs in this
 * one process with better-sqlite3, the server's schema (its migrations) and
 * its pragmas (WAL, synchronous=FULL), `batch` jobs per transaction: with
 * batch 1 every operation commits (and fsyncs) alone, as an unloaded server
 * would; with batch 100 each commit carries 100 operations, as group commit
 * at best would. Each state change writes its event and count row, like
 * the server. No gRPC, no validation, no protobuf: what SQLite alone allows.
 *
 * config: {dbPath, jobs, batch, synchronous}; answers {type: "done", jobs, ms, commits}.
 */
import Database from "better-sqlite3";
import { childChannel } from "../lib/children.mjs";
import { applyServerMigrations, checkJobsTable, leaseTokenHash, lifecycleStatements, queuedJobRow } from "../lib/sqlite-jobs.mjs";
import { nowMs } from "../lib/timing.mjs";

const channel = childChannel();
void channel.run(async () => {
  const { dbPath, jobs, batch, synchronous = "full" } = channel.config;
  const db = new Database(dbPath);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`);
  db.pragma("foreign_keys = ON");
  applyServerMigrations(db);
  checkJobsTable(db);
  const s = lifecycleStatements(db);
  const queue = "ceiling";

  const insert = db.transaction((from, to) => {
    const now = Date.now();
    for (let i = from; i < to; i++) {
      const row = queuedJobRow(queue, i, now);
      s.insertJob.run(row);
      s.adjustCount.run(queue, "queued", 1);
      s.insertEvent.get(row.id, queue, "submitted", null, "queued", now, null, 0);
    }
  });
  const claim = db.transaction((n) => {
    const now = Date.now();
    const rows = s.claimable.all(queue, now, n);
    for (const row of rows) {
      s.claim.run({ id: row.id, now, worker: "ceiling", expire: now + 60_000, hash: leaseTokenHash() });
      s.adjustCount.run(queue, "queued", -1);
      s.adjustCount.run(queue, "running", 1);
      s.insertEvent.get(row.id, queue, "claimed", "queued", "running", now, "ceiling", 1);
    }
    return rows.map((r) => r.id);
  });
  const complete = db.transaction((ids) => {
    const now = Date.now();
    for (const id of ids) {
      const row = s.jobById.get(id);
      if (row.state !== "running") throw new Error(`job ${id} is ${row.state}, not running`);
      s.complete.run({ id, now });
      s.adjustCount.run(queue, "running", -1);
      s.adjustCount.run(queue, "completed", 1);
      s.insertEvent.get(id, queue, "completed", "running", "completed", now, "ceiling", 1);
    }
  });

  let commits = 0;
  const t0 = nowMs();
  for (let i = 0; i < jobs; i += batch) {
    const to = Math.min(jobs, i + batch);
    insert(i, to);
    const ids = claim(to - i);
    if (ids.length !== to - i) throw new Error(`claimed ${ids.length} of ${to - i} jobs`);
    complete(ids);
    commits += 3;
  }
  const ms = nowMs() - t0;
  const done = db.prepare("SELECT count FROM job_counts WHERE queue = ? AND state = 'completed'").get(queue)?.count;
  db.close();
  if (done !== jobs) throw new Error(`${done} jobs completed, expected ${jobs}`);
  await channel.send({ type: "done", jobs, ms, commits });
});
