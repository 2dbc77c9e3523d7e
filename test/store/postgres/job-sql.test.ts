/**
 * ListJobs' plans on PostgreSQL (job-sql.ts listJobsQuery): every
 * combination of filters reads index ranges newest first and stops after its
 * page, a queue's listing through jobs_queue_state_recent one range per
 * state (there is no index of a queue alone, docs/performance.md "Writes per
 * job"); and a queue's backlog (job-counts.ts), whose count of waiting jobs
 * reads only them.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { JobState } from "../../../src/domain/job.js";
import { countStatements } from "../../../src/store/postgres/job-counts.js";
import { listJobsQuery } from "../../../src/store/postgres/job-sql.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("ListJobs on PostgreSQL", () => {
  const db = useTestSchema(probe, "job_sql");
  beforeAll(async () => {
    await db.migrate();
    // Thousands of jobs per queue and state: a plan that read past its page, or sorted a whole range, would show.
    await db.pool.query(
      `INSERT INTO ${db.schema}.jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
         schedule_time, create_time, update_time, deliveries)
       SELECT gen_random_uuid(), 'q' || (i % 3), 't', 'null', 0,
         (ARRAY['queued','running','retry','completed','completed','completed','dead','cancelled'])[1 + i % 8], 0, 3, 1000, i, i, i, 0
       FROM generate_series(1, 30000) AS i`,
    );
    await db.pool.query(`ANALYZE ${db.schema}.jobs`);
  });

  /** A range read newest first that stops after the page: a Limit right above the backward index scan. */
  const pagedRange = (index: string) => new RegExp(`->  Limit [^\\n]*\\n\\s*->  Index Scan Backward using ${index} `);

  async function plan(spec: { queue?: string; states?: JobState[]; beforeId?: string }): Promise<string> {
    const { text, values } = listJobsQuery(db.schema, { ...spec, limit: 51 });
    const { rows } = await db.pool.query(`EXPLAIN ${text}`, values);
    return rows.map((r) => r["QUERY PLAN"] as string).join("\n");
  }

  it("lists a queue newest first from jobs_queue_state_recent, one range per state, each stopping after the page", async () => {
    for (const spec of [{ queue: "q1" }, { queue: "q1", beforeId: "80000000-0000-0000-0000-000000000000" }]) {
      const p = await plan(spec);
      expect(p).toContain("Function Scan on unnest");
      expect(p).toMatch(pagedRange("jobs_queue_state_recent"));
      expect(p).not.toContain("Seq Scan");
    }
  });

  it("lists several states of a queue, or of every queue, by one range per state; one state by one range", async () => {
    const ofQueue = await plan({ queue: "q1", states: ["dead", "cancelled"] });
    expect(ofQueue).toMatch(pagedRange("jobs_queue_state_recent"));
    const ofAll = await plan({ states: ["dead", "cancelled", "dead"] });
    expect(ofAll).toMatch(pagedRange("jobs_state_recent"));
    const one = await plan({ queue: "q1", states: ["retry"] });
    expect(one).toContain("Index Scan Backward using jobs_queue_state_recent");
    expect(one).not.toContain("Sort");
    expect(await plan({})).toContain("Index Scan Backward using jobs_pkey");
  });

  it("counts a queue's backlog through jobs_pending_since from now on, never through the eligible jobs", async () => {
    const { rows } = await db.pool.query(`EXPLAIN ${countStatements(db.schema).backlog}`, ["q1", 15_000]);
    const p = rows.map((r) => r["QUERY PLAN"] as string).join("\n");
    // Half of q1's pending jobs wait past 15 000: an index scan or a bitmap of that range, never of the eligible ones.
    expect(p).toMatch(
      /Scan (using|on) jobs_pending_since[^\n]*\n\s*Index Cond: \(\(queue = 'q1'::text\) AND \(schedule_time > '15000'::bigint\)\)/,
    );
    expect(p).not.toContain("Seq Scan on jobs");
  });
});
