/**
 * What `leasequeue check` (and `restore`, before it installs a backup)
 * concludes from the facts an engine gathers about a database: its schema
 * version against this release's, the engine's own integrity verdict, and
 * the per-queue counts kept with every transition against a count of the
 * jobs themselves. The same rules for every engine; only the gathering is
 * engine-specific.
 */
import { JOB_STATES, type JobState } from "../../domain/job.js";
import { schemaTooNewMessage } from "./schema-version.js";

export interface QueueStateCount {
  queue: string;
  state: string;
  count: number;
}

/** What an engine found, read in one consistent snapshot. */
export interface DatabaseFacts {
  path: string;
  schemaVersion: number;
  latestSchemaVersion: number;
  /** The engine's integrity verdict: empty when it found nothing wrong, else one line per problem. */
  integrityProblems: string[];
  /** Whether the tables of a LeaseQueue database exist (absent: the remaining facts are empty). */
  hasJobTables: boolean;
  /** The per-queue counts as recorded by transitions (job_counts). */
  recordedCounts: QueueStateCount[];
  /** The same counted from the jobs. */
  actualCounts: QueueStateCount[];
  events: number;
}

export interface DatabaseReport extends DatabaseFacts {
  /** Jobs per state, counted from the jobs. */
  jobs: Record<JobState, number>;
  queues: number;
  /** The (queue, state) pairs whose recorded count differs from the jobs. */
  mismatches: CountMismatch[];
  /** Each thing that is wrong, as a sentence; empty when the database is sound. */
  problems: string[];
  /** Things worth knowing that are not wrong (an older schema version). */
  notes: string[];
}

export function reportOn(facts: DatabaseFacts): DatabaseReport {
  const problems = [...facts.integrityProblems.map((p) => `integrity: ${p}`)];
  const notes: string[] = [];
  const tooNew = schemaTooNewMessage(facts.path, facts.schemaVersion, facts.latestSchemaVersion);
  if (tooNew !== undefined) problems.push(tooNew);
  if (facts.schemaVersion === 0 || !facts.hasJobTables) {
    problems.push(`${facts.path} is not a LeaseQueue database (schema version ${facts.schemaVersion}, no jobs table)`);
  } else if (facts.schemaVersion < facts.latestSchemaVersion) {
    notes.push(
      `schema version ${facts.schemaVersion} is older than this release's ${facts.latestSchemaVersion}; ` +
        `the server migrates it at start (or run leasequeue migrate)`,
    );
  }
  const mismatches = countMismatches(facts.recordedCounts, facts.actualCounts);
  for (const m of mismatches) {
    problems.push(`job_counts records ${m.recorded} ${m.state} jobs in queue "${m.queue}", but the jobs table holds ${m.actual}`);
  }
  const jobs = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  for (const c of facts.actualCounts) if (c.state in jobs) jobs[c.state as JobState] += c.count;
  const queues = new Set(facts.actualCounts.map((c) => c.queue)).size;
  return { ...facts, jobs, queues, mismatches, problems, notes };
}

export interface CountMismatch {
  queue: string;
  state: string;
  recorded: number;
  actual: number;
}

/** Every (queue, state) whose recorded count differs from the jobs counted; a missing row counts as 0. */
export function countMismatches(recorded: QueueStateCount[], actual: QueueStateCount[]): CountMismatch[] {
  const key = (c: { queue: string; state: string }) => `${c.queue}\0${c.state}`;
  const rows = new Map<string, CountMismatch>();
  const row = (c: QueueStateCount) => {
    let r = rows.get(key(c));
    if (r === undefined) rows.set(key(c), (r = { queue: c.queue, state: c.state, recorded: 0, actual: 0 }));
    return r;
  };
  for (const c of recorded) row(c).recorded += c.count;
  for (const c of actual) row(c).actual += c.count;
  return [...rows.values()].filter((r) => r.recorded !== r.actual).sort((a, b) => key(a).localeCompare(key(b)));
}
