#!/usr/bin/env node
/**
 * The transport ceiling: LeaseQueueService with do-nothing handlers (Submit
 * and GetStats answer an empty response at once), served by the server's
 * own API listener and connectNodeAdapter options (same h2c listener, same
 * JSON and size settings), so its calls/s is what the transport alone
 * allows on this machine. Sends {type: "ready", url}; exits on "stop".
 */
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as pb from "../../dist/gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startApiListener } from "../../dist/src/server/api-listener.js";
import { childChannel } from "../lib/children.mjs";

const channel = childChannel();
void channel.run(async () => {
  const shutdown = new AbortController();
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(pb.LeaseQueueService, {
        submit: () => ({}),
        getStats: () => ({}),
      }),
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: 131_072,
    shutdownSignal: shutdown.signal,
  });
  const api = await startApiListener({ host: "127.0.0.1", port: 0, handler, maxRequestBytes: 131_072 });
  await channel.send({ type: "ready", url: api.address.url });
  await channel.next("stop");
  shutdown.abort();
  await api.close(1000);
});
