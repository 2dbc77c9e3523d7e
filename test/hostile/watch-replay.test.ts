/**
 * A long WatchEvents replay beside writers (docs/api.md "WatchEvents
 * limits"), against the real server in its own process: a replay whose
 * client does not read holds the server to the pages its connection has
 * taken (the server stops reading the history, and keeps no more of it than
 * that), writers beside it are all answered, and a replay that reads gets
 * the whole history and what the writers added, in order.
 * `node bench/watch-replay.mjs` measures what a replay costs the writers.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { LeaseQueueService, WatchEventsRequestSchema } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { openHttp2NonReader } from "../helpers/never-reading-watchers.js";
import { okJson, serversInTempDirs } from "../helpers/process.js";
import { join } from "node:path";

const HISTORY = 10_000;
const WRITERS = 8;
const WRITES = 25;

const sandbox = serversInTempDirs("replay");

async function eventsSent(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = /^leasequeue_watch_events_sent_total (\S+)$/m.exec(text);
  if (m === null) throw new Error("no leasequeue_watch_events_sent_total in /metrics");
  return Number(m[1]);
}

describe("a long replay beside writers", () => {
  it(
    "reads no further than its client takes, lets every writer through, and gives a reading client everything in order",
    { timeout: 180_000 },
    async () => {
      const server = await sandbox.start(join(sandbox.dir(), "jobs.db"), ["--sqlite-synchronous", "normal"]);
      for (let i = 0; i < HISTORY; i += 100) {
        await okJson(server.apiUrl, "SubmitBatch", {
          jobs: Array.from({ length: 100 }, (_, k) => ({ queue: "history", task: "t", payload: { i: i + k } })),
        });
      }

      // A replay of the whole history whose client never reads past its flow-control window.
      const close = await openHttp2NonReader(
        server.apiUrl,
        toBinary(WatchEventsRequestSchema, create(WatchEventsRequestSchema, { afterSequence: 0n })),
      );
      try {
        // Writers beside it: every Submit answered.
        const written = await Promise.all(
          Array.from({ length: WRITERS }, async (_, w) => {
            const ids: string[] = [];
            for (let i = 0; i < WRITES; i++)
              ids.push((await okJson(server.apiUrl, "Submit", { queue: "writes", task: "t", payload: { w, i } })).job.id);
            return ids;
          }),
        );
        expect(written.flat()).toHaveLength(WRITERS * WRITES);
        // The server stopped reading the history once the connection held what it had been given:
        // a few pages (100 events each) of 10,000, not the whole history buffered for a client that does not read.
        const sent = await eventsSent(server.metricsUrl);
        expect(sent).toBeLessThan(HISTORY / 4);
      } finally {
        close();
      }

      // A client that reads gets the history and the writes, each once, in sequence order.
      const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: server.apiUrl }));
      const abort = new AbortController();
      const sequences: bigint[] = [];
      const total = HISTORY + WRITERS * WRITES;
      for await (const res of client.watchEvents({ afterSequence: 0n }, { signal: abort.signal })) {
        if (res.event === undefined) continue;
        sequences.push(res.event.sequence);
        if (sequences.length === total) break;
      }
      abort.abort();
      expect(sequences).toEqual(Array.from({ length: total }, (_, i) => BigInt(i + 1)));
    },
  );
});
