/**
 * Every secondary index of the schema, described once for both engines:
 * what it serves, its columns, and where an engine's index differs and
 * why. The released migrations (sqlite/migrations.ts,
 * postgres/migrations.ts) keep the text they shipped with;
 * test/store/indexes.test.ts migrates a database of each engine and holds
 * every index in it to this list, so neither engine gains, loses or
 * changes an index without it. A new index goes here first, and each
 * engine's next migration creates it with `indexSql`.
 */

export type IndexEngine = "sqlite" | "postgres";

export interface IndexSpec {
  name: string;
  table: string;
  /** The key columns, as written in the CREATE INDEX (with DESC where it applies). */
  key: string;
  unique?: boolean;
  /** A partial index's predicate. */
  where?: string;
  /**
   * Columns carried for index-only reads but not ordered by: PostgreSQL's
   * INCLUDE. SQLite has no INCLUDE; there they follow the key columns,
   * which serves the same reads.
   */
  include?: string;
  /** What reads or writes use it. */
  serves: string;
  /** Where an engine's index has other key columns than `key`, and why. */
  differs?: Partial<Record<IndexEngine, { key: string; why: string }>>;
}

const PENDING = "state IN ('queued','retry')";

export const INDEXES: readonly IndexSpec[] = [
  {
    name: "jobs_claim_order",
    table: "jobs",
    key: "queue, priority DESC, schedule_time, id",
    where: PENDING,
    serves: "Claim: a queue's eligible jobs by priority desc, schedule_time, id",
  },
  {
    name: "jobs_pending_since",
    table: "jobs",
    key: "queue, schedule_time",
    where: PENDING,
    serves: "the oldest pending age and the next scheduled wake-up per queue",
  },
  {
    name: "jobs_lease_expiry",
    table: "jobs",
    key: "lease_expire_time",
    where: "state = 'running'",
    serves: "lease recovery: running jobs by expiry",
  },
  {
    name: "jobs_idempotency_key",
    table: "jobs",
    key: "queue, idempotency_key",
    unique: true,
    where: "idempotency_key IS NOT NULL",
    serves: "idempotency keys, scoped to a queue and reserved while the job exists",
  },
  {
    name: "jobs_queue_state_recent",
    table: "jobs",
    key: "queue, state, id",
    serves: "ListJobs (newest first) by queue and state; a queue's running count; bulk transitions' batches",
  },
  {
    name: "jobs_state_recent",
    table: "jobs",
    key: "state, id",
    serves: "ListJobs (newest first) by state",
  },
  {
    name: "jobs_finished",
    table: "jobs",
    key: "state, finish_time",
    where: "state IN ('completed','cancelled','dead')",
    serves: "retention: a pruning batch seeks straight to the oldest finished jobs due",
  },
  {
    name: "jobs_group_claim_order",
    table: "jobs",
    key: "queue, group_key, priority DESC, schedule_time, id",
    where: `${PENDING} AND group_key <> ''`,
    serves:
      "a group's eligible jobs in claim order (claims under group rules, ListGroups' count of pending groups); only jobs with a group have entries",
  },
  {
    name: "jobs_group_state",
    table: "jobs",
    key: "queue, group_key, state, id",
    where: "group_key <> ''",
    serves: "a group's jobs by state and id (running counts, ordered heads, ListGroups, ListJobs by group)",
  },
  {
    name: "job_events_by_job",
    table: "job_events",
    key: "job_id, sequence",
    serves: "a job's events (ListJobEvents; WatchEvents filtered by job)",
  },
  {
    name: "job_events_by_queue",
    table: "job_events",
    key: "queue, sequence",
    serves: "WatchEvents replays filtered by queue",
  },
  {
    name: "schedules_due",
    table: "schedules",
    key: "next_run_time",
    where: "next_run_time IS NOT NULL",
    serves: "the due schedules, earliest first, and the dispatcher's next wake-up",
  },
  {
    name: "queue_groups_held",
    table: "queue_groups",
    key: "queue, held_by",
    where: "due_time IS NULL AND held_by IS NOT NULL",
    serves: "a fair queue's groups parked until a lease finishes, by the rule that holds them",
  },
  {
    name: "queue_groups_turns",
    table: "queue_groups",
    key: "queue, served_seq, group_key",
    include: "due_time, version",
    where: "due_time IS NOT NULL",
    serves: "a fair claim's walk: a queue's due groups, least recently served first (TransactionPort.selectDueGroups)",
  },
  {
    name: "queue_groups_due",
    table: "queue_groups",
    key: "queue, due_time",
    where: "due_time IS NOT NULL",
    serves: "when a fair queue's next parked group becomes due (its claimers' wake-up)",
  },
  {
    name: "queue_activity_by_minute",
    table: "queue_activity",
    key: "minute, queue",
    serves: "retention: the samples older than a day, oldest first",
    differs: {
      sqlite: {
        key: "minute",
        why:
          "queue_activity is WITHOUT ROWID on SQLite, whose secondary index carries the primary key (queue, minute) after its own " +
          "columns: (minute) is already (minute, queue)",
      },
    },
  },
  {
    name: "job_dependencies_dependents",
    table: "job_dependencies",
    key: "depends_on_id, job_id",
    serves: "the jobs depending on one, so its end counts for each in the same transaction",
  },
];

/** The key columns of `spec` on `engine`, with SQLite's stand-in for INCLUDE. */
function indexKey(spec: IndexSpec, engine: IndexEngine): string {
  const key = spec.differs?.[engine]?.key ?? spec.key;
  return engine === "sqlite" && spec.include !== undefined ? `${key}, ${spec.include}` : key;
}

/** The CREATE INDEX statement of `spec` on `engine`. */
export function indexSql(spec: IndexSpec, engine: IndexEngine): string {
  const include = engine === "postgres" && spec.include !== undefined ? ` INCLUDE (${spec.include})` : "";
  const where = spec.where === undefined ? "" : ` WHERE ${spec.where}`;
  return `CREATE ${spec.unique ? "UNIQUE " : ""}INDEX ${spec.name} ON ${spec.table} (${indexKey(spec, engine)})${include}${where}`;
}
