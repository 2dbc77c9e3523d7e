#!/usr/bin/env node
// PostgreSQL drivers, measured on the statements a job store makes: the
// same small transactions through `pg` (node-postgres) and `postgres`
// (porsager), one connection at a time and several at once, plus batched
// and pipelined statements. Prints figures and the client CPU per
// operation; asserts nothing. Needs PostgreSQL (default
// postgres://postgres@127.0.0.1:5432/test) and the devDependency `postgres`.
//
//   node bench/pg-drivers.mjs [--url=URL] [--n=2000] [--rounds=3]
import pg from "pg";
import postgres from "postgres";

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const URL = arg("url", "postgres://postgres@127.0.0.1:5432/test");
const N = Number(arg("n", "2000"));
const ROUNDS = Number(arg("rounds", "3"));
const CONCURRENCY = 8;
const SCHEMA = `drivers_bench_${process.pid}`;

const TABLE = `${SCHEMA}.jobs`;
const INSERT = `INSERT INTO ${TABLE} (queue, state, payload) VALUES ($1, 'queued', $2) RETURNING id`;
const UPDATE = `UPDATE ${TABLE} SET state = 'running', attempts = attempts + 1 WHERE id = $1`;
const INSERT_MANY = `INSERT INTO ${TABLE} (queue, state, payload) SELECT $1, 'queued', p FROM unnest($2::text[]) AS p RETURNING id`;

/** One driver behind the four shapes of work measured. */
function pgDriver(synchronousCommit, pipeline = false) {
  const pool = new pg.Pool({ connectionString: URL, max: CONCURRENCY, pipeline, options: `-c synchronous_commit=${synchronousCommit}` });
  return {
    name: pipeline ? "pg pipeline" : "pg 8.23.1",
    async transaction(i) {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        const { rows } = await c.query({ name: "ins", text: INSERT, values: ["q", `{"i":${i}}`] });
        await c.query({ name: "upd", text: UPDATE, values: [rows[0].id] });
        await c.query("COMMIT");
      } finally {
        c.release();
      }
    },
    /** BEGIN with the INSERT, then the UPDATE with the COMMIT: two round trips where the connection pipelines. */
    async pipelinedTransaction(i) {
      const c = await pool.connect();
      try {
        const [, { rows }] = await Promise.all([c.query("BEGIN"), c.query({ name: "ins", text: INSERT, values: ["q", `{"i":${i}}`] })]);
        await Promise.all([c.query({ name: "upd", text: UPDATE, values: [rows[0].id] }), c.query("COMMIT")]);
      } finally {
        c.release();
      }
    },
    async batch(payloads) {
      await pool.query({ name: "many", text: INSERT_MANY, values: ["q", payloads] });
    },
    /** Statements sent without waiting for each other, on one connection. */
    async pipelined(count) {
      const c = await pool.connect();
      try {
        await Promise.all(Array.from({ length: count }, (_, i) => c.query({ name: "ins", text: INSERT, values: ["q", `{"i":${i}}`] })));
      } finally {
        c.release();
      }
    },
    end: () => pool.end(),
  };
}

function postgresDriver(synchronousCommit) {
  const sql = postgres(URL, { max: CONCURRENCY, onnotice: () => {}, connection: { synchronous_commit: synchronousCommit } });
  return {
    name: "postgres 3.4.9",
    async transaction(i) {
      await sql.begin(async (tx) => {
        const [row] = await tx.unsafe(INSERT, ["q", `{"i":${i}}`], { prepare: true });
        await tx.unsafe(UPDATE, [row.id], { prepare: true });
      });
    },
    async pipelinedTransaction(i) {
      const c = await sql.reserve();
      try {
        const [, [row]] = await Promise.all([c.unsafe("BEGIN"), c.unsafe(INSERT, ["q", `{"i":${i}}`], { prepare: true })]);
        await Promise.all([c.unsafe(UPDATE, [row.id], { prepare: true }), c.unsafe("COMMIT")]);
      } finally {
        c.release();
      }
    },
    async batch(payloads) {
      await sql.unsafe(INSERT_MANY, ["q", payloads], { prepare: true });
    },
    async pipelined(count) {
      await sql.reserve().then(async (c) => {
        try {
          await Promise.all(Array.from({ length: count }, (_, i) => c.unsafe(INSERT, ["q", `{"i":${i}}`], { prepare: true })));
        } finally {
          c.release();
        }
      });
    },
    end: () => sql.end(),
  };
}

async function measure(label, ops, fn) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await fn();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { label, rate: ops / seconds, cpuUsPerOp: (used.user + used.system) / ops };
}

async function scenarios(driver) {
  const results = [];
  let next = 0;
  results.push(
    await measure("txn insert+update, 1 connection", N, async () => {
      for (let i = 0; i < N; i++) await driver.transaction(i);
    }),
  );
  next = 0;
  results.push(
    await measure(`txn insert+update, ${CONCURRENCY} connections`, N, () =>
      Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < N) await driver.transaction(next++);
        }),
      ),
    ),
  );
  next = 0;
  results.push(
    await measure(`txn, 2 round trips, ${CONCURRENCY} connections`, N, () =>
      Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < N) await driver.pipelinedTransaction(next++);
        }),
      ),
    ),
  );
  const rows = Array.from({ length: 100 }, (_, i) => `{"i":${i}}`);
  results.push(
    await measure("batched: 100-row INSERT (rows/s)", N * 10, async () => {
      for (let i = 0; i < (N * 10) / 100; i++) await driver.batch(rows);
    }),
  );
  results.push(
    await measure("pipelined INSERTs, 1 connection", N, async () => {
      for (let i = 0; i < N / 100; i++) await driver.pipelined(100);
    }),
  );
  return results;
}

const admin = new pg.Client({ connectionString: URL });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
  CREATE TABLE ${TABLE} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL, state text NOT NULL,
    attempts int NOT NULL DEFAULT 0, payload text NOT NULL)`);
try {
  for (const sync of ["on", "off"]) {
    console.log(`\nsynchronous_commit=${sync}, ${N} operations per scenario, best of ${ROUNDS} rounds (alternating drivers)`);
    const best = new Map();
    for (let round = 0; round < ROUNDS; round++) {
      for (const make of [(s) => pgDriver(s), (s) => pgDriver(s, true), postgresDriver]) {
        const driver = make(sync);
        try {
          for (const r of await scenarios(driver)) {
            const key = `${r.label}\0${driver.name}`;
            const prev = best.get(key);
            if (prev === undefined || r.rate > prev.rate) best.set(key, r);
          }
        } finally {
          await driver.end();
        }
        await admin.query(`TRUNCATE ${TABLE}`);
      }
    }
    for (const [key, r] of best) {
      const [label, name] = key.split("\0");
      console.log(
        `${label.padEnd(38)} ${name.padEnd(15)} ${r.rate.toFixed(0).padStart(8)} /s  ${r.cpuUsPerOp.toFixed(0).padStart(5)} µs client CPU per op`,
      );
    }
  }
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await admin.end();
}
