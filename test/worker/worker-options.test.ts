/**
 * The SDK refuses settings the server would refuse (or that would quietly
 * misbehave) when the worker is created, not on the first claim: a
 * required option missing or of the wrong type is a TypeError, one out of
 * range a RangeError, each naming the option, thrown before anything
 * connects. Without `workerId` the worker names itself `ts-<host>-<pid>`,
 * as the Python (py-) and Go (go-) workers do.
 */
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { createWorker, type Worker, type WorkerOptions } from "../../src/worker/index.js";

const base: WorkerOptions = { url: "http://127.0.0.1:1", queue: "q", workerId: "w", handler: () => null };
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
});

/** Options as a user without type checking (plain JavaScript, a config file) might pass them. */
const loose = (o: Record<string, unknown>) => ({ ...base, ...o });

describe("createWorker", () => {
  it.each([
    ["a lease given in seconds by mistake", { leaseDuration: 30 }, /leaseDuration is in milliseconds/],
    ["a lease over 12 h", { leaseDuration: 43_200_001 }, /leaseDuration/],
    ["a heartbeat as long as the lease", { leaseDuration: 3000, heartbeatInterval: 3000 }, /heartbeatInterval/],
    ["concurrency 0", { concurrency: 0 }, /concurrency/],
    ["concurrency over the server's max_in_flight", { concurrency: 1001 }, /concurrency/],
    ["a queue name the server refuses", { queue: "no spaces" }, /queue/],
    ["an empty worker id", { workerId: "" }, /workerId/],
    ["a negative batching window", { ackBatchWindow: -1 }, /ackBatchWindow/],
    ["a batching window of an hour", { ackBatchWindow: 3_600_000 }, /ackBatchWindow is in milliseconds/],
    ["a shutdown timeout longer than a timer takes", { shutdownTimeout: Infinity }, /shutdownTimeout is in milliseconds/],
    ["a reconnect backoff of 0", { reconnectBackoff: { initialMs: 0 } }, /reconnectBackoff\.initialMs is in milliseconds/],
    [
      "a first reconnect wait over the largest",
      { reconnectBackoff: { initialMs: 500, maxMs: 100 } },
      /must not exceed reconnectBackoff\.maxMs/,
    ],
  ])("refuses %s (RangeError)", (_name, override, message) => {
    expect(() => createWorker({ ...base, ...override })).toThrow(RangeError);
    expect(() => createWorker({ ...base, ...override })).toThrow(message);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ["no queue", { queue: undefined }, /^createWorker: queue is required$/],
    ["a queue given as a number", { queue: 7 }, /^createWorker: queue must be a string, got number$/],
    ["a worker id given as a number", { workerId: 42 }, /^createWorker: workerId must be a string, got number$/],
    ["no handler", { handler: undefined }, /^createWorker: handler is required$/],
    ["a handler that is not a function", { handler: "echo" }, /^createWorker: handler must be a function, got string$/],
    ["neither url nor client", { url: undefined }, /exactly one of `url` and `client`/],
    ["both url and client", { client: {} }, /exactly one of `url` and `client`/],
    ["a url given as a port number", { url: 8080 }, /^createWorker: url must be a string, got number$/],
    ["a url without a scheme", { url: "127.0.0.1:8080" }, /^createWorker: url must be an http:\/\/ or https:\/\/ URL/],
    ["a client that is not one", { url: undefined, client: "http://127.0.0.1:1" }, /^createWorker: client must be a client/],
    ["an unknown transport", { transport: "http2" }, /^createWorker: transport must be "grpc", "connect" or "unary", got "http2"$/],
    ["a token given as a number", { token: 12345 }, /^createWorker: token must be a string, got number$/],
    ["concurrency given as a string", { concurrency: "4" }, /^createWorker: concurrency must be a number, got string$/],
    ["a lease given as a string", { leaseDuration: "30000" }, /^createWorker: leaseDuration must be a number, got string$/],
    ["a heartbeat given as a string", { heartbeatInterval: "5000" }, /^createWorker: heartbeatInterval must be a number, got string$/],
    ["a shutdown timeout given as a string", { shutdownTimeout: "10" }, /^createWorker: shutdownTimeout must be a number, got string$/],
    ["a shutdown timeout of NaN", { shutdownTimeout: NaN }, /^createWorker: shutdownTimeout must be a number/],
    ["a batching window given as a string", { ackBatchWindow: "1" }, /^createWorker: ackBatchWindow must be a number, got string$/],
    ["a reconnect backoff given as a number", { reconnectBackoff: 250 }, /^createWorker: reconnectBackoff must be an object/],
    [
      "a reconnect wait given as a string",
      { reconnectBackoff: { maxMs: "1000" } },
      /^createWorker: reconnectBackoff\.maxMs must be a number/,
    ],
    ["a workStream that is not a boolean", { workStream: "yes" }, /workStream must be a boolean/],
    ["the Work stream on the unary transport", { transport: "unary", workStream: true }, /transport "unary" takes no Work stream/],
    ["an onEvent that is not a function", { onEvent: "console" }, /^createWorker: onEvent must be a function, got string$/],
    ["tracing that is not an object", { tracing: true }, /^createWorker: tracing must be an object/],
  ])("refuses %s (TypeError naming the option)", (_name, override, message) => {
    expect(() => createWorker(loose(override))).toThrow(TypeError);
    expect(() => createWorker(loose(override))).toThrow(message);
  });

  it("refuses no options at all, naming what it needs", () => {
    expect(() => createWorker(undefined as unknown as WorkerOptions)).toThrow(/^createWorker: give the options, an object/);
  });

  it("never quotes a token it refuses", () => {
    const secret = { toString: () => "lq_secret" };
    let thrown: unknown;
    try {
      createWorker(loose({ token: secret }));
    } catch (err) {
      thrown = err;
    }
    expect((thrown as Error).message).toBe("createWorker: token must be a string, got object");
  });

  it("names itself ts-<host>-<pid> without a workerId, as the Python and Go workers do", () => {
    const { workerId: _, ...options } = base;
    const worker = createWorker({ ...options, onEvent: () => undefined });
    workers.push(worker);
    expect(worker.workerId).toBe(`ts-${hostname()}-${process.pid}`.slice(0, 128));
    expect(worker.workerId).toMatch(/^ts-.+-\d+$/);
  });
});
