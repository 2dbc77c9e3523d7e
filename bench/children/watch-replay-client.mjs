#!/usr/bin/env node
/**
 * The clients of bench/watch-replay.mjs (config in argv[2], JSON), each on
 * its own HTTP/2 connection (gRPC, binary protobuf):
 *
 *   writers {url, writers, seconds}   "ready", then on "go" that many Submit
 *                                     loops for `seconds`; "result" with the
 *                                     rate and the latency percentiles
 *   replay  {url, slow, events}       WatchEvents from after_sequence 0,
 *                                     "started" with the first message;
 *                                     answers "count" with the events so far;
 *                                     slow: a 10 ms pause after every 10 events
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as pb from "../../dist/gen/ts/leasequeue/v1/leasequeue_pb.js";
import { childChannel } from "../lib/children.mjs";
import { latencySummary, nowMs, sleep } from "../lib/timing.mjs";

const channel = childChannel();
const { config } = channel;
const client = createClient(pb.LeaseQueueService, createGrpcTransport({ baseUrl: config.url, pingIntervalMs: 30_000 }));

const roles = {
  async writers() {
    await client.getStats({});
    await channel.send({ type: "ready" });
    await channel.next("go");
    const latencies = [];
    const start = nowMs();
    const end = start + config.seconds * 1000;
    await Promise.all(
      Array.from({ length: config.writers }, async (_, w) => {
        for (let i = 0; nowMs() < end; i++) {
          const t = nowMs();
          await client.submit({ queue: "writes", task: "t", payload: { kind: { case: "stringValue", value: `${w}-${i}` } } });
          latencies.push(nowMs() - t);
        }
      }),
    );
    const seconds = (nowMs() - start) / 1000;
    const { p50, p99 } = latencySummary(latencies);
    await channel.send({ type: "result", result: { rate: latencies.length / seconds, p50, p99, seconds } });
    await channel.next("stop");
  },

  async replay() {
    let events = 0;
    const abort = new AbortController();
    void channel.next("stop").then(() => abort.abort());
    const answerCounts = async () => {
      for (;;) {
        await channel.next("count");
        await channel.send({ type: "count", events });
      }
    };
    void answerCounts();
    let started = false;
    try {
      for await (const res of client.watchEvents({ afterSequence: 0n }, { signal: abort.signal })) {
        if (!started) {
          started = true;
          await channel.send({ type: "started" });
        }
        if (res.event === undefined) continue;
        events++;
        if (config.slow && events % 10 === 0) await sleep(10);
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  },
};

await channel.run(() => roles[config.role]());
