/**
 * The peers measured in the same run, on the same workload: graphile-worker
 * and pg-boss on the local PostgreSQL, BullMQ on the local Redis, RabbitMQ
 * (amqplib) on the local broker. Each
 * adapter has the parent's side here (availability, setup, the store's own
 * count of finished jobs, teardown, which daemon to meter) and the client
 * side in bench/children/peer-client.mjs (enqueue, work, latency).
 *
 * Durability is made comparable: PostgreSQL must run with fsync=on and
 * synchronous_commit=on (checked and recorded); Redis gets appendonly yes +
 * appendfsync always for the run and its previous values back afterwards;
 * RabbitMQ gets quorum queues (a publish is confirmed once its Raft log is
 * fsynced), persistent messages, publisher confirms and manual acks.
 */
import { readFileSync } from "node:fs";
import pg from "pg";
import { Redis } from "ioredis";

export const POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/test";
export const REDIS = { host: "127.0.0.1", port: 6379 };
export const AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

async function withPg(fn) {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function postgresDurability() {
  return withPg(async (c) => {
    const get = async (name) => (await c.query(`SHOW ${name}`)).rows[0][name];
    return {
      server: `PostgreSQL ${await get("server_version")}`,
      fsync: await get("fsync"),
      synchronous_commit: await get("synchronous_commit"),
    };
  });
}

export async function postgresAvailable() {
  try {
    const d = await postgresDurability();
    if (d.fsync !== "on" || d.synchronous_commit !== "on")
      return { ok: false, why: `PostgreSQL runs with fsync=${d.fsync}, synchronous_commit=${d.synchronous_commit}` };
    return { ok: true, durability: d };
  } catch (err) {
    return { ok: false, why: `PostgreSQL at 127.0.0.1:5432 unreachable: ${err.message}` };
  }
}

const graphileSchema = "bench_graphile_worker";
const pgBossSchema = "bench_pg_boss";

export const PEERS = {
  "graphile-worker": {
    version: () => import("graphile-worker/package.json", { with: { type: "json" } }).then((m) => m.default.version),
    daemon: "postgres",
    available: postgresAvailable,
    async setup() {
      await withPg((c) => c.query(`DROP SCHEMA IF EXISTS ${graphileSchema} CASCADE`));
      const { runMigrations, Logger } = await import("graphile-worker");
      await runMigrations({ connectionString: POSTGRES_URL, schema: graphileSchema, logger: quietGraphileLogger(Logger) });
      return { connectionString: POSTGRES_URL, schema: graphileSchema };
    },
    /** graphile-worker deletes a job when it completes: done = nothing left in the table. */
    async finished(expected) {
      return withPg(async (c) => {
        const left = Number((await c.query(`SELECT count(*) AS n FROM ${graphileSchema}._private_jobs`)).rows[0].n);
        return { done: left === 0 ? expected : expected - left, left };
      });
    },
    async teardown() {
      await withPg((c) => c.query(`DROP SCHEMA IF EXISTS ${graphileSchema} CASCADE`));
    },
  },

  "pg-boss": {
    version: () => import("pg-boss/package.json", { with: { type: "json" } }).then((m) => m.default.version),
    daemon: "postgres",
    available: postgresAvailable,
    async setup() {
      await withPg((c) => c.query(`DROP SCHEMA IF EXISTS ${pgBossSchema} CASCADE`));
      const { default: PgBoss } = await import("pg-boss");
      const boss = new PgBoss({ connectionString: POSTGRES_URL, schema: pgBossSchema, supervise: false, schedule: false });
      boss.on("error", () => {});
      await boss.start();
      await boss.createQueue("bench");
      await boss.createQueue("latency");
      await boss.stop({ graceful: false, wait: true });
      return { connectionString: POSTGRES_URL, schema: pgBossSchema };
    },
    async finished() {
      return withPg(async (c) => {
        const done = Number(
          (await c.query(`SELECT count(*) AS n FROM ${pgBossSchema}.job WHERE name = 'bench' AND state = 'completed'`)).rows[0].n,
        );
        return { done };
      });
    },
    async teardown() {
      await withPg((c) => c.query(`DROP SCHEMA IF EXISTS ${pgBossSchema} CASCADE`));
    },
  },

  bullmq: {
    version: () => import("bullmq/package.json", { with: { type: "json" } }).then((m) => m.default.version),
    daemon: "redis-server",
    async available() {
      const redis = new Redis({ ...REDIS, lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000, retryStrategy: () => null });
      try {
        await redis.connect();
        const version = /redis_version:(\S+)/.exec(await redis.info("server"))?.[1];
        return {
          ok: true,
          durability: { server: `Redis ${version}`, appendonly: "yes (set for the run)", appendfsync: "always (set for the run)" },
        };
      } catch (err) {
        return { ok: false, why: `Redis at 127.0.0.1:6379 unreachable: ${err.message}` };
      } finally {
        redis.disconnect();
      }
    },
    async setup() {
      const redis = new Redis(REDIS);
      try {
        const previous = {
          appendonly: (await redis.config("GET", "appendonly"))[1],
          appendfsync: (await redis.config("GET", "appendfsync"))[1],
        };
        await redis.config("SET", "appendonly", "yes");
        await redis.config("SET", "appendfsync", "always");
        // appendonly yes starts an AOF rewrite; wait for it so it does not run during the measurement
        for (let n = 0; n < 100; n++) {
          const info = await redis.info("persistence");
          if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        const prefix = `bench-${process.pid}`;
        return { redis: REDIS, prefix, previous };
      } finally {
        redis.disconnect();
      }
    },
    async finished(expected, setup) {
      const { Queue } = await import("bullmq");
      const queue = new Queue("bench", { connection: REDIS, prefix: setup.prefix });
      try {
        return { done: await queue.getCompletedCount() };
      } finally {
        await queue.close();
      }
    },
    async teardown(setup) {
      const { Queue } = await import("bullmq");
      for (const name of ["bench", "latency"]) {
        const queue = new Queue(name, { connection: REDIS, prefix: setup.prefix });
        await queue.obliterate({ force: true }).catch(() => {});
        await queue.close();
      }
      const redis = new Redis(REDIS);
      try {
        await redis.config("SET", "appendfsync", setup.previous.appendfsync);
        await redis.config("SET", "appendonly", setup.previous.appendonly);
      } finally {
        redis.disconnect();
      }
    },
  },
  rabbitmq: {
    // amqplib's exports leave out its package.json.
    version: () =>
      Promise.resolve(JSON.parse(readFileSync(new URL("../../node_modules/amqplib/package.json", import.meta.url), "utf8")).version),
    daemon: "beam.smp",
    async available() {
      try {
        const { connect } = await import("amqplib");
        const connection = await connect(AMQP_URL, { timeout: 3000 });
        const version = connection.connection.serverProperties.version;
        await connection.close();
        return {
          ok: true,
          durability: {
            server: `RabbitMQ ${version}`,
            queue: "quorum (a publish is confirmed once fsynced)",
            messages: "persistent, publisher confirms, manual acks",
          },
        };
      } catch (err) {
        return { ok: false, why: `RabbitMQ at 127.0.0.1:5672 unreachable: ${err.message}` };
      }
    },
    async setup() {
      const queues = { bench: `bench-${process.pid}`, latency: `latency-${process.pid}` };
      await withAmqp(async (channel) => {
        for (const q of Object.values(queues)) {
          await channel.deleteQueue(q);
          await channel.assertQueue(q, QUORUM);
        }
      });
      return { url: AMQP_URL, queues, queueOptions: QUORUM };
    },
    /**
     * RabbitMQ does not answer acks: done = the bench queue holds no ready
     * message. teardown() checks, after the workers closed their channels
     * (which puts unacked messages back), that no message is left at all.
     */
    async finished(expected, setup) {
      const left = await withAmqp(async (channel) => (await channel.checkQueue(setup.queues.bench)).messageCount);
      return { done: expected - left, left };
    },
    async teardown(setup) {
      await withAmqp(async (channel) => {
        const left = (await channel.checkQueue(setup.queues.bench)).messageCount;
        for (const q of Object.values(setup.queues)) await channel.deleteQueue(q);
        if (left !== 0)
          throw new Error(`RabbitMQ: ${left} messages back in ${setup.queues.bench} after the workers closed: acks were lost`);
      });
    },
  },
};

/** RabbitMQ queues of the bench: durable quorum queues. */
const QUORUM = { durable: true, arguments: { "x-queue-type": "quorum" } };

async function withAmqp(fn) {
  const { connect } = await import("amqplib");
  const connection = await connect(AMQP_URL);
  try {
    return await fn(await connection.createChannel());
  } finally {
    await connection.close();
  }
}

/** graphile-worker logs every job at info level; keep only errors. */
export function quietGraphileLogger(Logger) {
  return new Logger(() => (level, message) => {
    if (level === "error") process.stderr.write(`graphile-worker: ${message}\n`);
  });
}
