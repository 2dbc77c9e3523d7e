/**
 * Event order across writers
 * (docs/postgresql.md "Event order across servers"): with many connections
 * committing events in whatever order their transactions end, and several
 * "servers" each running its own sequencer, a reader that tails the events
 * and resumes from where it stopped sees every committed event exactly once,
 * in strictly increasing sequence order, and one job's events in the order
 * they were written.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import type { EventDraft } from "../../../src/domain/job.js";
import { EventSequencer } from "../../../src/store/postgres/event-sequencer.js";
import { eventStatements, unsequencedEventParams } from "../../../src/store/postgres/event-sql.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();

function draft(jobId: string, message: string): EventDraft {
  return {
    jobId,
    queue: "q",
    groupKey: "",
    kind: "heartbeat",
    fromState: "running",
    toState: "running",
    eventTime: 0,
    workerId: "w",
    attempt: 1,
    message,
  };
}

interface SeenEvent {
  sequence: number;
  jobId: string;
  message: string;
}

describe.skipIf(skipWithoutPostgres(probe))("event sequences across concurrent writers", () => {
  const db = useTestSchema(probe, "events");
  const s = db.schema;
  let sql: ReturnType<typeof eventStatements>;

  beforeAll(async () => {
    await db.migrate();
    sql = eventStatements(s);
  });

  async function insertEvents(client: pg.ClientBase, events: EventDraft[]): Promise<void> {
    await client.query(sql.insertUnsequenced, unsequencedEventParams(events));
  }

  async function readAfter(client: pg.ClientBase, after: number, limit: number): Promise<SeenEvent[]> {
    const { rows } = await client.query(sql.eventsAfter, [after, limit]);
    return rows.map((r) => ({ sequence: Number(r.sequence), jobId: r.job_id as string, message: r.message as string }));
  }

  it("numbers an event that commits late after the ones already read, never below them", async () => {
    const early = await db.connect();
    const late = await db.connect();
    const sequencer = new EventSequencer(db.pool, s);
    try {
      const before = await sequencer.sequence();
      // early inserts first (smaller insertion id) but commits last.
      await early.query("BEGIN");
      await insertEvents(early, [draft(randomUUID(), "inserted first, committed last")]);
      await late.query("BEGIN");
      await insertEvents(late, [draft(randomUUID(), "inserted second, committed first")]);
      await late.query("COMMIT");
      const first = await sequencer.sequence();
      const read = await readAfter(db.pool as unknown as pg.ClientBase, before, 100);
      expect(read.map((e) => e.message)).toEqual(["inserted second, committed first"]);
      await early.query("COMMIT");
      const second = await sequencer.sequence();
      expect(second).toBe(first + 1);
      // A reader resuming after what it had read gets the late commit, numbered above it.
      expect((await readAfter(db.pool as unknown as pg.ClientBase, read.at(-1)!.sequence, 100)).map((e) => e.message)).toEqual([
        "inserted first, committed last",
      ]);
    } finally {
      await early.end();
      await late.end();
    }
  });

  it("shares one run among the callers that arrive while a run is under way, never the one already running", async () => {
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const counting = {
      async query(config: pg.QueryConfig) {
        runs++;
        if (runs === 1) await gate; // the first run is under way (its statement not answered yet)
        return db.pool.query(config);
      },
    } as unknown as pg.Pool;
    const sequencer = new EventSequencer(counting, s);
    const first = sequencer.sequence();
    await insertEvents(db.pool as unknown as pg.ClientBase, [draft(randomUUID(), "committed while a run is under way")]);
    const later = Array.from({ length: 10 }, () => sequencer.sequence());
    expect(runs).toBe(1);
    release();
    const [a, ...rest] = await Promise.all([first, ...later]);
    expect(runs).toBe(2);
    expect(new Set(rest).size).toBe(1);
    expect(rest[0]).toBeGreaterThanOrEqual(a);
    const { rows } = await db.pool.query(
      `SELECT sequence::int AS seq FROM ${s}.job_events WHERE message = 'committed while a run is under way'`,
    );
    expect(rows[0].seq).toBeLessThanOrEqual(rest[0]);
  });

  it("refuses to run inside a REPEATABLE READ transaction", async () => {
    const client = await db.connect();
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      await expect(client.query(`SELECT * FROM ${s}.sequence_events()`)).rejects.toThrow(/READ COMMITTED/);
    } finally {
      await client.query("ROLLBACK");
      await client.end();
    }
  });

  it("delivers every event exactly once, in order, to a reader resuming anywhere, under many concurrent writers", async () => {
    const WRITERS = 10;
    const TRANSACTIONS = 40;
    const SERVERS = 3;
    let seed = 12345;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;

    const start = await new EventSequencer(db.pool, s).sequence();
    const servers = Array.from({ length: SERVERS }, () => {
      const pool = new pg.Pool({ connectionString: db.url, max: 2 });
      return { pool, sequencer: new EventSequencer(pool, s) };
    });
    const committed: string[] = [];
    const writtenOrderByJob = new Map<string, string[]>();
    let writersDone = false;

    async function writer(w: number): Promise<void> {
      const client = await db.connect();
      const server = servers[w % SERVERS];
      // One job per writer: its events must come out in the order its transactions committed them.
      const jobId = randomUUID();
      const order: string[] = [];
      writtenOrderByJob.set(jobId, order);
      try {
        for (let t = 0; t < TRANSACTIONS; t++) {
          const events = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, i) => draft(jobId, `${w}:${t}:${i}`));
          const rollBack = random() < 0.1;
          await client.query("BEGIN");
          await insertEvents(client, events);
          // Hold some transactions open so that later insertions commit first.
          if (random() < 0.5) await client.query("SELECT pg_sleep($1)", [random() * 0.01]);
          await client.query(rollBack ? "ROLLBACK" : "COMMIT");
          if (rollBack) continue;
          for (const e of events) {
            committed.push(e.message!);
            order.push(e.message!);
          }
          // Servers number their own commits; a third of the commits (like submit() from an
          // application) are left for whichever sequencer runs next.
          if (w % 3 !== 0) await server.sequencer.sequence();
        }
      } finally {
        await client.end();
      }
    }

    /**
     * Tails with its own connection, reconnecting after every `resumeEvery`-th
     * read (0: never) and resuming after the last event it delivered. Reads
     * of at most 20 events: however the machine's pace spreads them, the
     * reader that resumes reads at least once per 20 events of the writers'.
     */
    async function reader(resumeEvery: number): Promise<{ seen: SeenEvent[]; resumes: number }> {
      const seen: SeenEvent[] = [];
      let after = start;
      let resumes = 0;
      let client = await db.connect();
      try {
        for (let reads = 1; ; reads++) {
          const finishing = writersDone;
          const batch = await readAfter(client, after, 1 + Math.floor(random() * 20));
          for (const e of batch) seen.push(e);
          if (batch.length > 0) after = batch.at(-1)!.sequence;
          if (resumeEvery > 0 && reads % resumeEvery === 0) {
            await client.end();
            client = await db.connect();
            resumes++;
          }
          if (batch.length === 0) {
            if (finishing) return { seen, resumes };
            await new Promise((r) => setTimeout(r, 2));
          }
        }
      } finally {
        await client.end();
      }
    }

    const readers = [reader(0), reader(5)];
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    // The periodic catch-up: numbers whatever no server numbered yet.
    await servers[0].sequencer.sequence();
    writersDone = true;
    const results = await Promise.all(readers);
    for (const server of servers) await server.pool.end();

    // At least one read per 20 of the (some 900) events, one resume per five reads.
    expect(results[1].resumes).toBeGreaterThan(5);
    for (const { seen } of results) {
      const sequences = seen.map((e) => e.sequence);
      for (let i = 1; i < sequences.length; i++) expect(sequences[i]).toBeGreaterThan(sequences[i - 1]);
      expect(seen.map((e) => e.message).sort()).toEqual([...committed].sort());
      for (const [jobId, order] of writtenOrderByJob) {
        expect(seen.filter((e) => e.jobId === jobId).map((e) => e.message)).toEqual(order);
      }
    }
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.unsequenced_events`);
    expect(rows[0].n).toBe(0);
  }, 60_000);
});
