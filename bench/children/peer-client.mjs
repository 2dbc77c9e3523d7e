#!/usr/bin/env node
/**
 * A bench client process for a peer (graphile-worker, pg-boss, BullMQ, RabbitMQ),
 * with the same roles and message protocol as leasequeue-client.mjs:
 *
 *   producer {system, setup, kind, producers: [[from, to], ...], batchSize}
 *   worker   {system, setup, kind, slots, prefetch}
 *   latency  {system, setup, samples, warmup}
 *
 * "unary": one add per job, `slots` concurrent handlers per worker process.
 * "batched": the library's bulk enqueue (graphile-worker addJobs, pg-boss
 * insert, BullMQ addBulk, RabbitMQ publishes awaited together) in batches
 * of `batchSize`, and workers that take `prefetch` jobs at a time where the
 * library can (graphile-worker localQueue + batched completions, pg-boss
 * batchSize, BullMQ concurrency, RabbitMQ's prefetch).
 * A job counts as done here when its handler returns; the parent then
 * waits until the library's store shows every job finished.
 */
import { childChannel } from "../lib/children.mjs";
import { quietGraphileLogger } from "../lib/peers.mjs";
import { nowMs, sleep } from "../lib/timing.mjs";

const channel = childChannel();
const { config } = channel;
const { setup } = config;

const adapters = {
  "graphile-worker": {
    async producer() {
      const { makeWorkerUtils, Logger } = await import("graphile-worker");
      const utils = await makeWorkerUtils({
        connectionString: setup.connectionString,
        schema: setup.schema,
        logger: quietGraphileLogger(Logger),
      });
      return {
        add: (i) => utils.addJob("bench", { i }),
        addMany: (is) => utils.addJobs(is.map((i) => ({ identifier: "bench", payload: { i } }))),
        close: () => utils.release(),
      };
    },
    async worker({ slots, prefetch, onJob, queue = "bench" }) {
      const { run, Logger } = await import("graphile-worker");
      const runner = await run({
        connectionString: setup.connectionString,
        schema: setup.schema,
        concurrency: slots,
        noHandleSignals: true,
        pollInterval: 2000,
        logger: quietGraphileLogger(Logger),
        taskList: { [queue]: (payload) => Promise.resolve(onJob(payload.i)) },
        ...(prefetch > 1 ? { preset: { worker: { localQueue: { size: prefetch }, completeJobBatchDelay: 0 } } } : {}),
      });
      return { close: () => runner.stop() };
    },
  },

  "pg-boss": {
    async newBoss() {
      const { default: PgBoss } = await import("pg-boss");
      const boss = new PgBoss({
        connectionString: setup.connectionString,
        schema: setup.schema,
        supervise: false,
        schedule: false,
        migrate: false,
        max: 4,
      });
      boss.on("error", (err) => process.stderr.write(`pg-boss: ${err.message}\n`));
      await boss.start();
      return boss;
    },
    async producer() {
      const boss = await this.newBoss();
      return {
        add: (i) => boss.send("bench", { i }),
        addMany: (is) => boss.insert(is.map((i) => ({ name: "bench", data: { i } }))),
        close: () => boss.stop({ graceful: false, wait: true }),
      };
    },
    async worker({ slots, prefetch, onJob, queue = "bench" }) {
      const boss = await this.newBoss();
      // pg-boss 10 has no concurrency option: each work() is one polling loop.
      // Unary: `slots` loops of one job; batched: one loop of `prefetch` jobs.
      const loops = prefetch > 1 ? 1 : slots;
      const batchSize = prefetch > 1 ? prefetch : 1;
      for (let n = 0; n < loops; n++) {
        await boss.work(queue, { batchSize, pollingIntervalSeconds: 0.5 }, (jobs) => {
          for (const job of jobs) onJob(job.data.i);
          return Promise.resolve();
        });
      }
      return { close: () => boss.stop({ graceful: false, wait: true }) };
    },
  },

  bullmq: {
    async producer() {
      const { Queue } = await import("bullmq");
      const queue = new Queue("bench", { connection: setup.redis, prefix: setup.prefix });
      await queue.waitUntilReady();
      return {
        add: (i) => queue.add("bench", { i }),
        addMany: (is) => queue.addBulk(is.map((i) => ({ name: "bench", data: { i } }))),
        close: () => queue.close(),
      };
    },
    async worker({ slots, prefetch, onJob, queue = "bench" }) {
      const { Worker } = await import("bullmq");
      const worker = new Worker(queue, (job) => Promise.resolve(onJob(job.data.i)), {
        connection: setup.redis,
        prefix: setup.prefix,
        concurrency: prefetch > 1 ? prefetch : slots,
      });
      worker.on("error", (err) => process.stderr.write(`bullmq: ${err.message}\n`));
      await worker.waitUntilReady();
      return { close: () => worker.close(true) };
    },
    async latencyProducer() {
      const { Queue } = await import("bullmq");
      const queue = new Queue("latency", { connection: setup.redis, prefix: setup.prefix });
      await queue.waitUntilReady();
      return { add: (i) => queue.add("latency", { i }), close: () => queue.close() };
    },
  },
};

/** RabbitMQ: a confirm channel per producer; a publish counts once the broker confirmed it (a quorum queue: fsynced). */
async function amqpProducer(queue) {
  const { connect } = await import("amqplib");
  const connection = await connect(setup.url);
  const channel = await connection.createConfirmChannel();
  const body = (i) => Buffer.from(JSON.stringify({ i }));
  const publish = (i) =>
    new Promise((resolve, reject) =>
      channel.sendToQueue(queue, body(i), { persistent: true }, (err) =>
        err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(),
      ),
    );
  return {
    add: publish,
    addMany: (is) => Promise.all(is.map(publish)),
    close: () => connection.close(),
  };
}

adapters.rabbitmq = {
  producer: () => amqpProducer(setup.queues.bench),
  latencyProducer: () => amqpProducer(setup.queues.latency),
  async worker({ slots, prefetch, onJob, queue = "bench" }) {
    const { connect } = await import("amqplib");
    const connection = await connect(setup.url);
    const channel = await connection.createChannel();
    await channel.prefetch(prefetch > 1 ? prefetch : slots);
    await channel.consume(
      setup.queues[queue],
      (msg) => {
        if (msg === null) return; // the queue was deleted
        onJob(JSON.parse(msg.content.toString()).i);
        channel.ack(msg);
      },
      { noAck: false },
    );
    // Closing the channel first: the broker has every ack before the close is answered.
    return { close: () => channel.close().then(() => connection.close()) };
  },
};

const adapter = adapters[config.system];
if (adapter === undefined) throw new Error(`unknown peer ${config.system}`);

/** A producer for the latency queue: BullMQ needs its own Queue object; the SQL peers take the queue name per call. */
async function latencyProducer() {
  if (adapter.latencyProducer !== undefined) return adapter.latencyProducer();
  if (config.system === "pg-boss") {
    const boss = await adapter.newBoss();
    return { add: (i) => boss.send("latency", { i }), close: () => boss.stop({ graceful: false, wait: true }) };
  }
  const { makeWorkerUtils, Logger } = await import("graphile-worker");
  const utils = await makeWorkerUtils({
    connectionString: setup.connectionString,
    schema: setup.schema,
    logger: quietGraphileLogger(Logger),
  });
  return { add: (i) => utils.addJob("latency", { i }), close: () => utils.release() };
}

const roles = {
  async producer() {
    const producers = await Promise.all(config.producers.map(() => adapter.producer()));
    await channel.send({ type: "ready" });
    await channel.next("go");
    const results = await Promise.all(
      config.producers.map(async ([from, to], k) => {
        const p = producers[k];
        const first = nowMs();
        let calls = 0;
        if (config.kind === "batched") {
          for (let i = from; i < to; i += config.batchSize) {
            const is = [];
            for (let j = i; j < Math.min(to, i + config.batchSize); j++) is.push(j);
            await p.addMany(is);
            calls++;
          }
        } else {
          for (let i = from; i < to; i++) {
            await p.add(i);
            calls++;
          }
        }
        return { first, last: nowMs(), submitted: to - from, calls };
      }),
    );
    await channel.send({
      type: "done",
      first: Math.min(...results.map((r) => r.first)),
      last: Math.max(...results.map((r) => r.last)),
      submitted: results.reduce((a, r) => a + r.submitted, 0),
      calls: results.reduce((a, r) => a + r.calls, 0),
    });
    // Keep the connections (and their PostgreSQL backends, whose CPU the parent meters) until the run ends.
    await channel.next("stop");
    await Promise.race([Promise.all(producers.map((p) => p.close())), sleep(3000)]);
  },

  async worker() {
    const completed = [];
    let last = 0;
    const w = await adapter.worker({
      slots: config.slots,
      prefetch: config.kind === "batched" ? config.prefetch : 1,
      onJob: (i) => {
        completed.push(i);
        last = nowMs();
      },
    });
    const progress = setInterval(() => void channel.send({ type: "progress", completed: completed.length }), 100);
    await channel.send({ type: "ready" });
    await channel.next("stop");
    clearInterval(progress);
    await channel.send({ type: "result", completed: Int32Array.from(completed), last });
    await Promise.race([w.close(), sleep(3000)]);
  },

  async latency() {
    let resolveJob;
    const w = await adapter.worker({
      slots: 1,
      prefetch: 1,
      queue: "latency",
      onJob: (i) => resolveJob?.({ i, at: nowMs() }),
    });
    const producer = await latencyProducer();
    await channel.send({ type: "ready" });
    await channel.next("go");
    const samples = [];
    for (let n = 0; n < config.warmup + config.samples; n++) {
      const ran = new Promise((resolve) => (resolveJob = resolve));
      const t0 = nowMs();
      await producer.add(n);
      const { i, at } = await ran;
      if (i !== n) throw new Error(`the idle worker ran job ${i}, expected ${n}`);
      if (n >= config.warmup) samples.push(at - t0);
      await sleep(5); // let the worker finish the job and go idle again
    }
    await channel.send({ type: "done", samples });
    await Promise.race([Promise.all([producer.close(), w.close()]), sleep(3000)]);
  },
};

void channel.run(roles[config.role]);
