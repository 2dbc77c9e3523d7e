/**
 * Transactional enqueue (docs/postgresql.md "Transactional enqueue"):
 * `<schema>.submit(...)` called with node-postgres inside the caller's
 * transaction creates a job exactly as the Submit RPC would, if and only if
 * that transaction commits.
 */
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { isJobId } from "../../../src/domain/ids.js";
import { BOUNDS } from "../../../src/domain/request-bounds.js";
import { submitFingerprint, type NewJob } from "../../../src/domain/submission.js";
import { traceContextOf } from "../../../src/domain/trace-context.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";
import { until } from "../../helpers/until.js";

const probe = await probePostgres();

/** A payload given as JSON text that JavaScript cannot write (such as 1e400), passed as it is. */
class RawJson {
  constructor(readonly text: string) {}
}

/** `[[...[1]...]]`: a value whose deepest container is at level depth - 1 (its depth is `depth`). */
function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** submit()'s parameters by name (named notation), as an application would pass them. */
type SubmitArgs = Partial<{
  queue: string | null;
  task: string | null;
  payload: unknown;
  priority: number;
  max_attempts: number;
  retry_base_delay: string;
  schedule_time: string;
  delay: string;
  idempotency_key: string;
  trace_context: unknown;
}>;

const TYPES: Record<string, string> = {
  queue: "text",
  task: "text",
  payload: "jsonb",
  priority: "integer",
  max_attempts: "integer",
  retry_base_delay: "interval",
  schedule_time: "timestamptz",
  delay: "interval",
  idempotency_key: "text",
  trace_context: "jsonb",
};

function submitCall(schema: string, args: SubmitArgs): { text: string; values: unknown[] } {
  const names = Object.keys(args) as Array<keyof SubmitArgs>;
  const values = names.map((n) => {
    if (n === "trace_context") return JSON.stringify(args.trace_context);
    if (n !== "payload" || args.payload === null) return args[n];
    return args.payload instanceof RawJson ? args.payload.text : JSON.stringify(args.payload);
  });
  const list = names.map((n, i) => `${n} => $${i + 1}::${TYPES[n]}`).join(", ");
  return { text: `SELECT ${schema}.submit(${list}) AS id`, values };
}

describe.skipIf(skipWithoutPostgres(probe))("<schema>.submit(): transactional enqueue", () => {
  const db = useTestSchema(probe, "submit");
  const s = db.schema;

  beforeAll(async () => {
    await db.migrate();
  });

  async function submit(args: SubmitArgs, client: pg.ClientBase | pg.Pool = db.pool): Promise<string> {
    const { text, values } = submitCall(s, args);
    const { rows } = await client.query<{ id: string }>(text, values);
    return rows[0].id;
  }

  async function refusal(args: SubmitArgs): Promise<pg.DatabaseError> {
    try {
      await submit(args);
    } catch (err) {
      return err as pg.DatabaseError;
    }
    throw new Error(`submit(${JSON.stringify(args)}) was accepted`);
  }

  async function jobRow(id: string): Promise<Record<string, unknown> | undefined> {
    const { rows } = await db.pool.query(`SELECT * FROM ${s}.jobs WHERE id = $1`, [id]);
    return rows[0];
  }

  async function inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>, commit: boolean): Promise<T> {
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query(commit ? "COMMIT" : "ROLLBACK");
      return result;
    } finally {
      client.release();
    }
  }

  it("creates the job when the caller's transaction commits, as the RPC would store it", async () => {
    const before = Date.now();
    const id = await inTransaction(async (client) => {
      await client.query("SELECT 1"); // the application's own work would be here
      return submit({ queue: "billing", task: "invoice.generate", payload: { invoiceId: "inv_481" } }, client);
    }, true);
    const after = Date.now();
    expect(isJobId(id)).toBe(true);
    expect(id[14]).toBe("7"); // UUID version 7
    expect(Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16)).toBeGreaterThanOrEqual(before - 1000);
    const row = await jobRow(id);
    expect(row).toMatchObject({
      queue: "billing",
      task: "invoice.generate",
      payload: '{"invoiceId":"inv_481"}',
      priority: 0,
      state: "queued",
      attempts: 0,
      max_attempts: 3,
      retry_base_delay_ms: "15000",
      deliveries: 0,
      finish_time: null,
      worker_id: null,
      idempotency_key: null,
      request_hash: null,
    });
    const created = Number(row!.create_time);
    expect(created).toBeGreaterThanOrEqual(before - 1000);
    expect(created).toBeLessThanOrEqual(after + 1000);
    expect(Number(row!.schedule_time)).toBe(created);
    // Its SUBMITTED event (numbered later by the sequencer) and its count delta.
    const events = await db.pool.query(
      `SELECT kind, from_state, to_state, event_time, worker_id, attempt, message, queue
      FROM ${s}.unsequenced_events WHERE job_id = $1`,
      [id],
    );
    expect(events.rows).toEqual([
      {
        kind: "submitted",
        from_state: null,
        to_state: "queued",
        event_time: row!.create_time,
        worker_id: null,
        attempt: 0,
        message: null,
        queue: "billing",
      },
    ]);
    const deltas = await db.pool.query(
      `SELECT state, sum(delta)::int AS n FROM ${s}.job_count_deltas WHERE queue = 'billing' GROUP BY state`,
    );
    expect(deltas.rows).toEqual([{ state: "queued", n: 1 }]);
    // Its queue's activity (docs/api.md "Queue activity"): one more queued job in the minute of its create_time.
    const activity = await db.pool.query(
      `SELECT minute::float8 AS minute, sum(queued)::int AS queued FROM ${s}.queue_activity_deltas WHERE queue = 'billing' GROUP BY minute`,
    );
    expect(activity.rows).toEqual([{ minute: Number(row!.create_time) - (Number(row!.create_time) % 60_000), queued: 1 }]);
  });

  it("leaves nothing behind when the caller's transaction rolls back", async () => {
    const id = await inTransaction((client) => submit({ queue: "rolled-back", task: "t", payload: [1, 2] }, client), false);
    expect(await jobRow(id)).toBeUndefined();
    const left = await db.pool.query(
      `SELECT (SELECT count(*) FROM ${s}.jobs WHERE queue = 'rolled-back')::int AS jobs,
              (SELECT count(*) FROM ${s}.unsequenced_events WHERE queue = 'rolled-back')::int AS events,
              (SELECT count(*) FROM ${s}.job_count_deltas WHERE queue = 'rolled-back')::int AS deltas`,
    );
    expect(left.rows[0]).toEqual({ jobs: 0, events: 0, deltas: 0 });
  });

  it("notifies the schema's channel when the transaction commits, and not when it rolls back", async () => {
    const listener = await db.connect();
    try {
      const heard: string[] = [];
      listener.on("notification", (m) => heard.push(m.payload ?? ""));
      await listener.query(`LISTEN "${s}"`);
      await inTransaction((client) => submit({ queue: "notified-not", task: "t" }, client), false);
      await inTransaction(async (client) => {
        await submit({ queue: "notified", task: "t" }, client);
        await submit({ queue: "notified", task: "t" }, client);
      }, true);
      // A round trip on the listening connection delivers what was sent before it.
      await until("the commit's notification on the listening connection", async () => {
        await listener.query("SELECT 1");
        return heard.length > 0;
      });
      expect(heard.map((p) => JSON.parse(p))).toEqual([{ kind: "submitted", queue: "notified" }]);
    } finally {
      await listener.end();
    }
  });

  it("applies the RPC's defaults: queue default, priority 0, 3 attempts, 15s base delay, due now; 0 and '' mean the default", async () => {
    const a = await jobRow(await submit({ task: "t" }));
    const b = await jobRow(await submit({ queue: "", task: "t", priority: 0, max_attempts: 0, payload: null }));
    for (const row of [a, b]) {
      expect(row).toMatchObject({ queue: "default", payload: "null", priority: 0, max_attempts: 3, retry_base_delay_ms: "15000" });
      expect(row!.schedule_time).toBe(row!.create_time);
    }
  });

  it("takes every field: priority, attempts, base delay, a delay or an absolute schedule time", async () => {
    const delayed = await jobRow(
      await submit({ queue: "q", task: "t", priority: -100, max_attempts: 100, retry_base_delay: "1 hour", delay: "90 seconds" }),
    );
    expect(delayed).toMatchObject({ priority: -100, max_attempts: 100, retry_base_delay_ms: "3600000" });
    expect(Number(delayed!.schedule_time) - Number(delayed!.create_time)).toBe(90_000);
    const at = await jobRow(await submit({ queue: "q", task: "t", schedule_time: "2020-01-02T03:04:05.678Z" }));
    expect(Number(at!.schedule_time)).toBe(Date.parse("2020-01-02T03:04:05.678Z"));
  });

  describe("refuses bad input with a SQLSTATE, the field as the error's column and the RPC's message", () => {
    const name = "must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit";
    const cases: Array<[string, SubmitArgs, string, string, string]> = [
      ["queue with a space", { queue: "bil ling", task: "t" }, "22023", "queue", `queue: ${name}`],
      ["queue of 65 characters", { queue: "q".repeat(65), task: "t" }, "22023", "queue", `queue: ${name}`],
      ["queue starting with a dot", { queue: ".q", task: "t" }, "22023", "queue", `queue: ${name}`],
      ["queue with a newline at the end", { queue: "q\n", task: "t" }, "22023", "queue", `queue: ${name}`],
      ["no task", { queue: "q" }, "22023", "task", "task: is required"],
      ["empty task", { queue: "q", task: "" }, "22023", "task", "task: is required"],
      ["task with a slash", { queue: "q", task: "a/b" }, "22023", "task", `task: ${name}`],
      ["priority 101", { task: "t", priority: 101 }, "22023", "priority", "priority: must be between -100 and 100"],
      ["priority -101", { task: "t", priority: -101 }, "22023", "priority", "priority: must be between -100 and 100"],
      ["max_attempts 101", { task: "t", max_attempts: 101 }, "22023", "max_attempts", "max_attempts: must be between 1 and 100"],
      ["max_attempts -1", { task: "t", max_attempts: -1 }, "22023", "max_attempts", "max_attempts: must be between 1 and 100"],
      [
        "negative base delay",
        { task: "t", retry_base_delay: "-1 second" },
        "22023",
        "retry_base_delay",
        "retry_base_delay: must not be negative",
      ],
      [
        "base delay over 1h",
        { task: "t", retry_base_delay: "3600.001 seconds" },
        "22023",
        "retry_base_delay",
        "retry_base_delay: must be between 0s and 1h",
      ],
      ["negative delay", { task: "t", delay: "-1 ms" }, "22023", "delay", "delay: must not be negative"],
      ["delay over 30 days", { task: "t", delay: "30 days 1 ms" }, "22023", "delay", "delay: must be between 0s and 30d"],
      [
        "schedule time over 30 days ahead",
        { task: "t", schedule_time: new Date(Date.now() + 31 * 86_400_000).toISOString() },
        "22023",
        "schedule_time",
        "schedule_time: must be at most 30 days ahead",
      ],
      [
        "schedule time infinity",
        { task: "t", schedule_time: "infinity" },
        "22023",
        "schedule_time",
        "schedule_time: is not a valid timestamp",
      ],
      [
        "both delay and schedule time",
        { task: "t", delay: "1s", schedule_time: "2020-01-01Z" },
        "22023",
        "delay",
        "delay: give schedule_time or delay, not both",
      ],
      [
        "idempotency key with a space",
        { task: "t", idempotency_key: "a b" },
        "22023",
        "idempotency_key",
        "idempotency_key: must be 1-128 visible ASCII characters (0x21-0x7e)",
      ],
      [
        "idempotency key of 129 characters",
        { task: "t", idempotency_key: "k".repeat(129) },
        "22023",
        "idempotency_key",
        "idempotency_key: must be 1-128 visible ASCII characters (0x21-0x7e)",
      ],
      [
        "idempotency key not ASCII",
        { task: "t", idempotency_key: "clé" },
        "22023",
        "idempotency_key",
        "idempotency_key: must be 1-128 visible ASCII characters (0x21-0x7e)",
      ],
      [
        "payload nested 33 levels",
        { task: "t", payload: nested(33) },
        "22023",
        "payload",
        "payload: is nested more than 32 levels deep; the limit is 32 levels",
      ],
      [
        "payload with a number no double holds",
        { task: "t", payload: new RawJson("[1e400]") },
        "22023",
        "payload",
        "payload: holds the number",
      ],
      [
        "payload over 64 KiB",
        { task: "t", payload: "x".repeat(BOUNDS.jsonBytes - 1) },
        "54000",
        "payload",
        `payload: is ${BOUNDS.jsonBytes + 1} bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes`,
      ],
      [
        "payload far over 64 KiB",
        { task: "t", payload: "x".repeat(40 * BOUNDS.jsonBytes) },
        "54000",
        "payload",
        `payload: is ${40 * BOUNDS.jsonBytes + 2} bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes`,
      ],
    ];
    it.each(cases)("%s", async (_label, args, code, column, message) => {
      const err = await refusal(args);
      expect(err.code).toBe(code);
      expect(err.column).toBe(column);
      expect(err.message.startsWith(message)).toBe(true);
    });

    it("and writes nothing for a refused call", async () => {
      await refusal({ queue: "refused-only", task: "t", priority: 1000 });
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.jobs WHERE queue = 'refused-only'`);
      expect(rows[0].n).toBe(0);
    });
  });

  it("accepts the bounds themselves: 32 levels, exactly 64 KiB, 128-character keys, 64-character names", async () => {
    const exact = "x".repeat(BOUNDS.jsonBytes - 2); // plus its two quotes
    const id = await submit({ queue: "q".repeat(64), task: "t".repeat(64), payload: exact, idempotency_key: "~".repeat(128) });
    expect((await jobRow(id))!.payload).toBe(JSON.stringify(exact));
    const deep = await jobRow(await submit({ task: "t", payload: nested(32) }));
    expect(deep!.payload).toBe(JSON.stringify(nested(32)));
  });

  describe("trace_context", () => {
    const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /** Maps the RPC refuses, each with the refusal it words (domain/trace-context.ts traceContextOf). */
    const bad: Array<[string, Record<string, string>]> = [
      ["an unknown key", { traceparent: parent, baggage: "k=v" }],
      ["upper-case hex", { traceparent: parent.toUpperCase() }],
      ["version ff", { traceparent: `ff${parent.slice(2)}` }],
      ["version 00 with a fifth field", { traceparent: `${parent}-00` }],
      ["an all-zero trace-id", { traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` }],
      ["an all-zero parent-id", { traceparent: `00-4bf92f3577b34da6a3ce929d0e0e4736-${"0".repeat(16)}-01` }],
      ["a tracestate without a traceparent", { tracestate: "congo=t61rcWkgMzE" }],
      ["a tracestate member without =", { traceparent: parent, tracestate: "congo" }],
      ["a tracestate key in upper case", { traceparent: parent, tracestate: "Congo=1" }],
      ["33 tracestate members", { traceparent: parent, tracestate: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",") }],
      ["a tracestate of 513 bytes", { traceparent: parent, tracestate: `k=${"v".repeat(252)},l=${"v".repeat(256)}` }],
    ];

    it.each(bad)("refuses %s as the RPC does (22023, column trace_context)", async (_label, traceContext) => {
      const read = traceContextOf(traceContext);
      expect("problem" in read).toBe(true);
      const err = await refusal({ task: "t", trace_context: traceContext });
      expect(err.code).toBe("22023");
      expect(err.column).toBe("trace_context");
      expect(err.message).toBe(`trace_context: ${(read as { problem: string }).problem}`);
    });

    it("refuses a value that is not an object of strings", async () => {
      for (const traceContext of [["x"], { traceparent: 1 }]) {
        const err = await refusal({ task: "t", trace_context: traceContext });
        expect([err.code, err.column, err.message]).toEqual(["22023", "trace_context", "trace_context: must be an object of strings"]);
      }
    });

    it("stores the context as the RPC stores it: tracestate absent or empty is none, empty members and a future version allowed", async () => {
      const good: Array<Record<string, string>> = [
        { traceparent: parent, tracestate: " congo=t61rcWkgMzE ,, tenant@vendor=a b" },
        { traceparent: parent, tracestate: "" },
        { traceparent: `01${parent.slice(2)}-future` },
        {},
      ];
      for (const traceContext of good) {
        const read = traceContextOf(traceContext);
        if (!("context" in read)) throw new Error(`refused ${JSON.stringify(traceContext)}`);
        const row = await jobRow(await submit({ task: "t", trace_context: traceContext }));
        expect({ traceparent: row!.traceparent, tracestate: row!.tracestate }, JSON.stringify(traceContext)).toEqual({
          traceparent: read.context?.traceparent ?? null,
          tracestate: read.context === null || read.context.tracestate === "" ? null : read.context.tracestate,
        });
      }
      expect((await jobRow(await submit({ task: "t" })))!.traceparent).toBeNull();
    });
  });

  describe("idempotency keys", () => {
    it("returns the existing job for the same key and the same request, writing nothing more", async () => {
      const args: SubmitArgs = { queue: "idem", task: "t", payload: { b: 1.5, a: [1, "x"] }, idempotency_key: "order-1" };
      const first = await submit(args);
      // The same request: other key order, and the defaults spelled out.
      const again = await submit({ ...args, payload: { a: [1, "x"], b: 1.5 }, priority: 0, max_attempts: 3, retry_base_delay: "15 s" });
      expect(again).toBe(first);
      const { rows } = await db.pool.query(
        `SELECT (SELECT count(*) FROM ${s}.jobs WHERE queue = 'idem')::int AS jobs,
                (SELECT count(*) FROM ${s}.unsequenced_events WHERE queue = 'idem')::int AS events`,
      );
      expect(rows[0]).toEqual({ jobs: 1, events: 1 });
    });

    it("refuses the same key with a different request (unique_violation, like the RPC's already_exists)", async () => {
      const id = await submit({ queue: "idem2", task: "t", payload: 1, idempotency_key: "k" });
      for (const other of [{ payload: 2 }, { task: "u" }, { priority: 1 }, { delay: "0s" }] as SubmitArgs[]) {
        const err = await refusal({ queue: "idem2", task: "t", payload: 1, idempotency_key: "k", ...other });
        expect(err.code).toBe("23505");
        expect(err.column).toBe("idempotency_key");
        expect(err.message).toBe(`idempotency_key: was already used in queue "idem2" for a different request (job ${id})`);
      }
      // Keys are scoped to a queue.
      expect(await submit({ queue: "idem3", task: "t", payload: 2, idempotency_key: "k" })).not.toBe(id);
    });

    it("fingerprints a request exactly as the server does, so a key used over the API is honoured here", async () => {
      const payloads: unknown[] = [
        null,
        { z: 1, a: { é: [true, false, null], "\u{1F600}": 1, "\uE000": 2, "": 0 } },
        [0.1, -2.5e-7, 1e21, 123456789012345680000, 5e-324, 1.7976931348623157e308, -0],
        'line\nbreak "quoted" \\ \u0001 \u2028 ü 😀',
        { n: 1, N: 2, nn: 3, "10": 4, "9": 5 },
      ];
      const jobs: NewJob[] = payloads.flatMap((p, i) => [
        {
          queue: "fp",
          task: `t${i}`,
          groupKey: "",
          payloadJson: JSON.stringify(p),
          priority: 7,
          maxAttempts: 5,
          retryBaseDelayMs: 1500,
          schedule: null,
          idempotencyKey: `a${i}`,
          traceContext: null,
        },
        {
          queue: "fp",
          task: `t${i}`,
          groupKey: `tenant-"${i}"\\`,
          payloadJson: JSON.stringify(p),
          priority: 0,
          maxAttempts: 3,
          retryBaseDelayMs: 15_000,
          schedule: { delayMs: 2500 },
          idempotencyKey: `b${i}`,
          traceContext: null,
        },
        {
          queue: "fp",
          task: `t${i}`,
          groupKey: "",
          payloadJson: JSON.stringify(p),
          priority: 0,
          maxAttempts: 3,
          retryBaseDelayMs: 0,
          schedule: { at: 1_700_000_000_123 },
          idempotencyKey: `c${i}`,
          traceContext: null,
        },
      ]);
      for (const job of jobs) {
        const { rows } = await db.pool.query<{ fp: string }>(
          `SELECT ${s}.request_fingerprint($1, $2, ${s}.json_text($3::jsonb, true, 'payload', 32), $4, $5, $6, $7, $8, $9) AS fp`,
          [
            job.queue,
            job.task,
            job.payloadJson,
            job.priority,
            job.maxAttempts,
            job.retryBaseDelayMs,
            job.schedule === null ? null : "at" in job.schedule ? "at" : "delay",
            job.schedule === null ? null : "at" in job.schedule ? job.schedule.at : job.schedule.delayMs,
            job.groupKey,
          ],
        );
        expect(rows[0].fp, job.payloadJson).toBe(submitFingerprint(job));
      }
      // A job the server stored (its request_hash from submitFingerprint) is found by the same request here.
      const served: NewJob = {
        queue: "fp-api",
        task: "t",
        groupKey: "",
        payloadJson: '{"b":[1,2],"a":"x"}',
        priority: 0,
        maxAttempts: 3,
        retryBaseDelayMs: 15_000,
        schedule: null,
        idempotencyKey: "api-1",
        traceContext: null,
      };
      const apiId = "01890000-0000-7000-8000-000000000001";
      await db.pool.query(
        `INSERT INTO ${s}.jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
          schedule_time, create_time, update_time, deliveries, idempotency_key, request_hash)
         VALUES ($1, $2, $3, $4, 0, 'queued', 0, 3, 15000, 0, 0, 0, 0, $5, $6)`,
        [apiId, served.queue, served.task, served.payloadJson, served.idempotencyKey, submitFingerprint(served)],
      );
      expect(await submit({ queue: "fp-api", task: "t", payload: { a: "x", b: [1, 2] }, idempotency_key: "api-1" })).toBe(apiId);
    });

    it("lets one of two concurrent transactions with the same key create the job; the other gets its id", async () => {
      const a = await db.pool.connect();
      const b = await db.pool.connect();
      try {
        await a.query("BEGIN");
        await b.query("BEGIN");
        const args: SubmitArgs = { queue: "race", task: "t", payload: { n: 1 }, idempotency_key: "same" };
        const first = await submit(args, a);
        const second = submit(args, b); // waits for a's transaction on the unique index
        await a.query("COMMIT");
        expect(await second).toBe(first);
        await b.query("COMMIT");
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.jobs WHERE queue = 'race'`);
        expect(rows[0].n).toBe(1);
      } finally {
        a.release();
        b.release();
      }
    });
  });

  it("stores the payload as the compact JSON the server would store, numbers written as JavaScript writes them", async () => {
    const samples = [
      "1.50",
      "1E2",
      "0.1e1",
      "-0",
      "-0.0",
      "1e21",
      "1e20",
      "123456789012345678901234567890",
      "0.000001",
      "1e-7",
      "4.35",
      "2e-323",
      // Exact ties, where one digit fewer still reads back as the same double, and the extremes.
      "44367663606241180",
      "-39493090887317940",
      "9007199254740993",
      "0.30000000000000004",
      "1.7976931348623157e308",
      "5e-324",
      "2.4703282292062328e-324",
      "99999999999999999999",
      "0.1234567890123456789",
      "1.0000000000000002",
    ];
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let i = 0; i < 2000; i++) {
      const x = (random() - 0.5) * 10 ** Math.floor(random() * 80 - 40);
      samples.push(JSON.stringify(x), JSON.stringify(Math.round(x)));
    }
    const text = `[${samples.join(",")}]`;
    const { rows } = await db.pool.query<{ t: string }>(`SELECT ${s}.json_text($1::jsonb, false, 'payload', 32) AS t`, [text]);
    expect(rows[0].t).toBe(JSON.stringify(JSON.parse(text)));
    // One by one too: a number already written as JavaScript writes it takes the fast path.
    const each = await db.pool.query<{ t: string[] }>(
      `SELECT array_agg(${s}.json_text(x, false, 'payload', 32) ORDER BY i) AS t FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(x, i)`,
      [text],
    );
    expect(each.rows[0].t).toEqual(samples.map((n) => JSON.stringify(JSON.parse(n))));
  });

  it("writes the same compact text by its fast path as by walking the value", async () => {
    const payloads = [
      { "a, b": "c: d", 'q"uo\\te': ["x, y", "\\", '\\"', { ": ": ", " }], n: [1, -2, 3.25, 0.001, 12345678901234] },
      ["", " ", ", ", ": ", '"', "\\", "\u0001\n\t", "ü 😀 \u2028"],
      { z: { y: { x: [[], {}, [{}], null, true, false] } }, "": 0, bb: "b", a: "aa" },
    ];
    for (const p of payloads) {
      const { rows } = await db.pool.query<{ fast: string; walked: string }>(
        `SELECT ${s}.json_text($1::jsonb, false, 'payload', 32) AS fast, ${s}.json_text_walk($1::jsonb, false, false, 'payload') AS walked`,
        [JSON.stringify(p)],
      );
      // The walk writes no blank at all outside strings, so equal texts are compact.
      expect(rows[0].fast).toBe(rows[0].walked);
      expect(JSON.parse(rows[0].fast)).toEqual(p);
    }
  });

  it("matches names and keys with domain/request-bounds.ts's own patterns", async () => {
    const candidates = ["a", "A9._:-", "-a", "a b", "é", "a\n", "\na", "k".repeat(64), "k".repeat(65), "!~", "a\u007f", "x:y/z", ""];
    for (const [pattern, bound] of [
      ["name", BOUNDS.name],
      ["idempotencyKey", BOUNDS.idempotencyKey],
    ] as const) {
      const source = bound.source.replaceAll("\\", "\\\\").replaceAll("'", "''");
      const { rows } = await db.pool.query<{ ok: boolean[] }>(
        `SELECT array_agg(c ~ E'${source}' ORDER BY i) AS ok FROM unnest($1::text[]) WITH ORDINALITY AS x(c, i)`,
        [candidates],
      );
      expect(rows[0].ok, pattern).toEqual(candidates.map((c) => bound.test(c)));
    }
  });
});
