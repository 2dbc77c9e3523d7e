/**
 * The SDK refuses settings the server would refuse (or that would quietly
 * misbehave) when the worker is created, not on the first claim.
 */
import { describe, expect, it } from "vitest";
import { createWorker, type WorkerOptions } from "../../src/worker/index.js";

const base: WorkerOptions = { url: "http://127.0.0.1:1", queue: "q", workerId: "w", handler: () => null };

describe("createWorker", () => {
  it.each([
    ["a lease given in seconds by mistake", { leaseDuration: 30 }, /leaseDuration is in milliseconds/],
    ["a lease over 12 h", { leaseDuration: 43_200_001 }, /leaseDuration/],
    ["a heartbeat as long as the lease", { leaseDuration: 3000, heartbeatInterval: 3000 }, /heartbeatInterval/],
    ["concurrency 0", { concurrency: 0 }, /concurrency/],
    ["concurrency over the server's max_in_flight", { concurrency: 1001 }, /concurrency/],
    ["a queue name the server refuses", { queue: "no spaces" }, /queue/],
    ["an empty worker id", { workerId: "" }, /workerId/],
    ["both url and client", { client: {} as never }, /exactly one of `url` and `client`/],
    ["a negative batching window", { ackBatchWindow: -1 }, /ackBatchWindow/],
    ["a batching window of an hour", { ackBatchWindow: 3_600_000 }, /ackBatchWindow is in milliseconds/],
    ["a workStream that is not a boolean", { workStream: "yes" as never }, /workStream must be a boolean/],
    ["the Work stream on the unary transport", { transport: "unary" as const, workStream: true }, /transport "unary" takes no Work stream/],
  ])("refuses %s", (_name, override, message) => {
    expect(() => createWorker({ ...base, ...override })).toThrow(message);
  });
});
