/**
 * Loaded into the server under test by bench/pg-writes.mjs (`node --import
 * <this file> bin/leasequeue.js serve ...`): counts every statement the
 * PostgreSQL store sends, by kind, by transaction and by round trip, by
 * wrapping node-postgres' `Client.prototype.query`. A round trip is a burst
 * of statements sent on one connection while none of its earlier ones is
 * awaiting an answer (the store's connections pipeline).
 *
 * SIGUSR1 starts the count afresh; SIGUSR2 writes it, as JSON, to the file
 * named by LEASEQUEUE_BENCH_COUNT_FILE. Nothing else of the server changes.
 */
import { writeFileSync } from "node:fs";
import pg from "pg";

/** What a statement is, from its text (the store's statements are fixed texts per schema). */
const KINDS = [
  [/^BEGIN/, "BEGIN"],
  [/^COMMIT/, "COMMIT"],
  [/^ROLLBACK TO/, "ROLLBACK TO SAVEPOINT"],
  [/^ROLLBACK/, "ROLLBACK"],
  [/^RELEASE/, "RELEASE SAVEPOINT"],
  [/^SAVEPOINT/, "SAVEPOINT"],
  [/record_events\(/, "record_events()"],
  [/sequence_events\(/, "sequence_events()"],
  [/compact_job_counts\(/, "compact_job_counts()"],
  [/compact_queue_activity\(/, "compact_queue_activity()"],
  [/^INSERT INTO \S+\.queue_activity_deltas/, "INSERT activity deltas"],
  [/pg_notify|^NOTIFY/, "NOTIFY"],
  [/^INSERT INTO \S+\.jobs /, "INSERT jobs"],
  [/^UPDATE \S+\.jobs j SET/, "UPDATE jobs"],
  [/WHERE id = ANY\(\$1::uuid\[\]\) ORDER BY id FOR UPDATE/, "SELECT jobs FOR UPDATE (the batch's jobs)"],
  [/lease_expire_time <= \$1 AND queue = \$2/, "SELECT expired leases of the queue"],
  [/state = 'running' AND lease_expire_time <= \$1/, "SELECT expired leases"],
  [/schedule_time <= \$2\s+ORDER BY priority DESC/, "SELECT claimable"],
  [/min\(schedule_time\)[\s\S]*schedule_time > \$2/, "SELECT next scheduled time"],
  [/min\(schedule_time\)/, "SELECT oldest pending"],
  [/paused_queues WHERE queue = \$1$/, "SELECT paused"],
  [/queue_configs WHERE queue = \$1 FOR UPDATE/, "SELECT queue config"],
  [/^INSERT INTO \S+\.job_count_deltas/, "INSERT count deltas"],
  [/job_counts\s+UNION ALL/, "SELECT counts"],
  [/FROM \S+\.job_events WHERE sequence > \$1 ORDER BY/, "SELECT events after"],
  [/clock_timestamp\(\)/, "SELECT clock"],
  [/AS latest,\s+EXISTS/, "SELECT state (catch-up)"],
  [/^SELECT 1$/, "SELECT 1 (listener check)"],
];

function kindOf(text) {
  const t = text.trim();
  for (const [pattern, kind] of KINDS) if (pattern.test(t)) return kind;
  return t.replace(/\s+/g, " ").slice(0, 60);
}

/** Rows a many-row statement writes: the length of its first bound array. */
function rowsOf(kind, values) {
  if (!["INSERT jobs", "UPDATE jobs", "INSERT count deltas", "record_events()"].includes(kind)) return 0;
  return Array.isArray(values) && Array.isArray(values[0]) ? values[0].length : 0;
}

/** A transaction's kind by what it did (group commit may mix operations). */
function transactionKind(kinds) {
  const parts = [];
  if (kinds.has("INSERT jobs")) parts.push("submit");
  if (kinds.has("SELECT claimable") || kinds.has("SELECT paused")) parts.push("claim");
  if (kinds.has("SELECT jobs FOR UPDATE (the batch's jobs)")) parts.push("acknowledge");
  return parts.length > 0 ? parts.join("+") : "other";
}

let count;
function reset() {
  count = { since: Date.now(), statements: {}, transactions: {}, outside: {} };
}
reset();

const connections = new WeakMap();
/** The original method (read through its descriptor: it is called with each client as `this`). */
const query = Object.getOwnPropertyDescriptor(pg.Client.prototype, "query").value;
pg.Client.prototype.query = function countedQuery(config, values, callback) {
  const text = typeof config === "string" ? config : config?.text;
  if (typeof text !== "string") return query.call(this, config, values, callback);
  const bound = typeof config === "string" ? values : config.values;
  const kind = kindOf(text);
  let c = connections.get(this);
  if (c === undefined) connections.set(this, (c = { inFlight: 0, transaction: null }));
  const newRoundTrip = c.inFlight === 0;
  c.inFlight++;
  const rows = rowsOf(kind, bound);
  const s = (count.statements[kind] ??= { statements: 0, rows: 0 });
  s.statements++;
  s.rows += rows;
  if (kind === "BEGIN") c.transaction = { kinds: [], roundTrips: 1, rows: {} };
  else if (c.transaction !== null) {
    c.transaction.kinds.push(kind);
    if (newRoundTrip) c.transaction.roundTrips++;
    if (rows > 0) c.transaction.rows[kind] = (c.transaction.rows[kind] ?? 0) + rows;
  } else {
    const o = (count.outside[kind] ??= { statements: 0, roundTrips: 0 });
    o.statements++;
    if (newRoundTrip) o.roundTrips++;
  }
  if ((kind === "COMMIT" || kind === "ROLLBACK") && c.transaction !== null) {
    const t = c.transaction;
    c.transaction = null;
    const k = (count.transactions[transactionKind(new Set(t.kinds))] ??= {
      transactions: 0,
      statements: 0,
      roundTrips: 0,
      rows: {},
      shapes: {},
    });
    k.transactions++;
    k.statements += t.kinds.length + 1;
    k.roundTrips += t.roundTrips;
    for (const [r, n] of Object.entries(t.rows)) k.rows[r] = (k.rows[r] ?? 0) + n;
    const shape = ["BEGIN", ...t.kinds].join(" | ");
    k.shapes[shape] = (k.shapes[shape] ?? 0) + 1;
  }
  const settled = () => void c.inFlight--;
  const answer = query.call(this, config, values, callback);
  if (answer !== undefined && typeof answer.then === "function") answer.then(settled, settled);
  else settled();
  return answer;
};

process.on("SIGUSR1", reset);
process.on("SIGUSR2", () => {
  const file = process.env.LEASEQUEUE_BENCH_COUNT_FILE;
  if (file !== undefined) writeFileSync(file, JSON.stringify({ ...count, until: Date.now() }));
});
