#!/usr/bin/env node
/**
 * A bench client process for LeaseQueue (gRPC over HTTP/2 with
 * @connectrpc/connect-node createGrpcTransport, binary protobuf, one
 * HTTP/2 connection per producer and per worker process). Its role comes
 * in the config (argv[2], JSON):
 *
 *   producer  {url, kind, driver?, producers: [[from, to], ...], batchSize, queue, groups?, payload?}
 *             (groups > 0: job i gets group_key `g<i mod groups>`, leasequeue-drivers.mjs groupKeyOf)
 *   worker    {url, kind, driver?, slots, maxInFlight, queue, workerId}
 *   latency   {url, kind, driver?, samples, warmup, queue}
 *
 * (`driver`: the scenario's driver key, else the first of its kind: leasequeue-drivers.mjs.)
 *   watchers  {url, count, connections, queue}
 *   noop      {url, callers, calls, warmup}   (the do-nothing ceiling)
 *
 * Protocol: "ready" once connected (a worker: once its streams or polls
 * are open), then waits for "go"; producers, latency and noop answer
 * "done"; workers send "progress" every 100 ms and, after "stop", a
 * "result" with the payload index of every job they completed.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as pb from "../../dist/gen/ts/leasequeue/v1/leasequeue_pb.js";
import { childChannel } from "../lib/children.mjs";
import { selectDriver } from "../lib/leasequeue-drivers.mjs";
import { nowMs } from "../lib/timing.mjs";

const channel = childChannel();
const { config } = channel;

/** A client on its own HTTP/2 connection. */
function newClient() {
  return createClient(pb.LeaseQueueService, createGrpcTransport({ baseUrl: config.url, pingIntervalMs: 30_000 }));
}

/** Opens the HTTP/2 connection before the clock starts. */
async function warm(client) {
  await client.getStats({});
}

const driver = () => selectDriver(config.kind, pb.LeaseQueueService, pb, config.driver).driver;

const roles = {
  async producer() {
    const d = driver();
    const clients = config.producers.map(() => newClient());
    await Promise.all(clients.map(warm));
    await channel.send({ type: "ready" });
    await channel.next("go");
    const results = await Promise.all(
      config.producers.map(([from, to], k) =>
        d.produce({
          client: clients[k],
          queue: config.queue,
          from,
          to,
          batchSize: config.batchSize,
          schemas: pb,
          groups: config.groups ?? 0,
          payload: config.payload ?? "small",
        }),
      ),
    );
    await channel.send({
      type: "done",
      first: Math.min(...results.map((r) => r.first)),
      last: Math.max(...results.map((r) => r.last)),
      submitted: results.reduce((a, r) => a + r.submitted, 0),
      calls: results.reduce((a, r) => a + r.calls, 0),
    });
  },

  async worker() {
    const d = driver();
    const client = newClient();
    await warm(client);
    const abort = new AbortController();
    const completed = [];
    let last = 0;
    let readySent = false;
    const onReady = () => {
      if (readySent) return;
      readySent = true;
      void channel.send({ type: "ready" });
    };
    const progress = setInterval(() => void channel.send({ type: "progress", completed: completed.length }), 100);
    const working = d.work({
      client,
      queue: config.queue,
      workerId: config.workerId,
      slots: config.slots,
      maxInFlight: config.maxInFlight,
      signal: abort.signal,
      onReady,
      onCompleted: (i, at) => {
        completed.push(i);
        last = at;
      },
    });
    const ended = working.then(
      () => new Error("the worker's driver ended before it was told to stop"),
      (err) => err,
    );
    const first = await Promise.race([channel.next("stop").then(() => "stop"), ended]);
    clearInterval(progress);
    if (first !== "stop") throw first;
    abort.abort();
    await working; // drivers return normally once aborted; anything else is a failure
    await channel.send({ type: "result", completed: Int32Array.from(completed), last });
  },

  async latency() {
    const d = driver();
    const producer = newClient();
    const worker = newClient();
    await Promise.all([warm(producer), warm(worker)]);
    await channel.send({ type: "ready" });
    await channel.next("go");
    const samples = await d.latency({ producer, worker, queue: config.queue, samples: config.samples, warmup: config.warmup });
    await channel.send({ type: "done", samples });
  },

  async watchers() {
    const clients = Array.from({ length: config.connections }, () => newClient());
    await Promise.all(clients.map(warm));
    const abort = new AbortController();
    let events = 0;
    let open = 0;
    let registered = 0;
    let failure;
    let allRegistered;
    const registeredAll = new Promise((resolve) => (allRegistered = resolve));
    for (let n = 0; n < config.count; n++) {
      const client = clients[n % clients.length];
      open++;
      (async () => {
        let first = true;
        for await (const msg of client.watchEvents({ queue: config.queue }, { signal: abort.signal })) {
          if (first) {
            first = false;
            if (++registered === config.count) allRegistered();
          }
          if (msg.event !== undefined) events++;
        }
      })()
        .catch((err) => {
          if (!abort.signal.aborted) failure ??= err;
        })
        .finally(() => open--);
    }
    await registeredAll;
    await channel.send({ type: "ready", registered });
    await channel.next("stop");
    const stillOpen = open;
    abort.abort();
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows, as is, what the driver failed with
    if (failure !== undefined) throw failure;
    await channel.send({ type: "result", events, stillOpen });
  },

  async noop() {
    const client = newClient();
    await warm(client);
    const call = () => client.submit({ queue: "noop", task: "noop", payload: { kind: { case: "numberValue", value: 1 } } });
    for (let n = 0; n < config.warmup; n++) await call();
    await channel.send({ type: "ready" });
    await channel.next("go");
    let remaining = config.calls;
    const t0 = nowMs();
    await Promise.all(
      Array.from({ length: config.callers }, async () => {
        while (remaining > 0) {
          remaining--;
          await call();
        }
      }),
    );
    await channel.send({ type: "done", calls: config.calls, ms: nowMs() - t0 });
  },
};

const role = roles[config.role];
if (role === undefined) throw new Error(`unknown role ${config.role}`);
void channel.run(role);
