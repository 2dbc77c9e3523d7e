/**
 * A refusal no retry can cure stops the worker instead of leaving it to
 * reconnect forever (src/worker/refusal.ts): on `invalid_argument`,
 * `unauthenticated`, `permission_denied` or `unimplemented` the worker
 * reports a `fatal` `error` event with the server's ConnectError, stops as
 * close() stops it (`closed` event), and `worker.closed` rejects with that
 * error. Any other failure (here `unavailable`: nothing listens) keeps the
 * reconnect with backoff, and `worker.closed` resolves once close() is done.
 * An `invalid_argument` naming one acknowledgement (`acks[i]...`) is about
 * that one, not the worker: the stream is reopened and the acknowledgement,
 * sent again, refused on its own. The token refusals are in auth.test.ts.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { afterEach, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, type LeaseQueueClientOptions, type Worker } from "../../src/worker/index.js";
import { isFinalRefusal } from "../../src/worker/refusal.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  await t?.close();
  t = undefined;
});

/** How `worker.closed` settled: the error it rejected with, or "resolved". */
function settled(worker: Worker): Promise<unknown> {
  return worker.closed.then(
    () => "resolved",
    (err: unknown) => err,
  );
}

it.each<[string, Omit<LeaseQueueClientOptions, "url">, boolean]>([
  ["gRPC (Work)", { transport: "grpc" }, false],
  ["Connect over HTTP/1.1 (StreamClaims)", { transport: "connect", httpVersion: "1.1" }, false],
  ["Connect over HTTP/1.1, unary (Claim)", { transport: "connect", httpVersion: "1.1" }, true],
])(
  "stops with unimplemented when the URL has a path the server does not serve, over %s",
  { timeout: 30_000 },
  async (_name, protocol, unary) => {
    t = await startTestServer();
    const log = workerEventLog();
    const client = createLeaseQueueClient({ url: `${t.apiUrl}/leasequeue`, ...protocol });
    const worker = createWorker({
      client,
      ...(unary ? { transport: "unary" as const } : {}),
      queue: "billing",
      onEvent: log.onEvent,
      handler: () => null,
    });
    workers.push(worker);
    const refusal = await settled(worker);
    expect(refusal).toBeInstanceOf(ConnectError);
    expect(refusal).toMatchObject({ code: Code.Unimplemented, rawMessage: "HTTP 404" });
    expect(log.events).toEqual([{ type: "error", error: refusal, fatal: true }, { type: "closed" }]);
  },
);

it("stops with invalid_argument when the server refuses the request (here an interceptor's worker id)", { timeout: 30_000 }, async () => {
  t = await startTestServer();
  // An interceptor of the user's that rewrites what the SDK checked: the server is the one to refuse it.
  const tagWorkerId: Interceptor = (next) => (req) => {
    if (req.method.name === "Claim") (req.message as unknown as { workerId: string }).workerId = "billing worker 1";
    return next(req);
  };
  const client = createLeaseQueueClient({ url: t.apiUrl, transport: "connect", httpVersion: "1.1", interceptors: [tagWorkerId] });
  const log = workerEventLog();
  const worker = createWorker({
    client,
    transport: "unary",
    queue: "billing",
    workerId: "billing-1",
    onEvent: log.onEvent,
    handler: () => null,
  });
  workers.push(worker);
  const refusal = await settled(worker);
  expect(refusal).toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringMatching(/^worker_id: /) });
  expect(log.all("error")).toEqual([{ type: "error", error: refusal, fatal: true }]);
  expect(log.all("disconnected")).toEqual([]);
  expect(log.events.at(-1)).toEqual({ type: "closed" });
  // close() after the stop resolves, and `closed` stays rejected.
  await worker.close();
  await expect(worker.closed).rejects.toBe(refusal);
});

it("keeps reconnecting on unavailable, and `closed` resolves after close()", { timeout: 30_000 }, async () => {
  const log = workerEventLog();
  const worker = createWorker({
    url: "http://127.0.0.1:1",
    queue: "billing",
    reconnectBackoff: { initialMs: 20, maxMs: 50 },
    onEvent: log.onEvent,
    handler: () => null,
  });
  const disconnected = await log.waitFor("disconnected", 3);
  expect(disconnected.every((e) => e.error.code === Code.Unavailable)).toBe(true);
  expect(log.all("error")).toEqual([]);
  await worker.close();
  expect(await settled(worker)).toBe("resolved");
  expect(log.events.at(-1)).toEqual({ type: "closed" });
});

it("tells the refusals it stops on from those it retries, by code (and, for invalid_argument, what it names)", () => {
  const final = (message: string, code: Code) => isFinalRefusal(new ConnectError(message, code));
  expect(final("start.worker_id: is required", Code.InvalidArgument)).toBe(true);
  expect(final("queue: must match ...", Code.InvalidArgument)).toBe(true);
  expect(final("acks[3].lease_token: is required", Code.InvalidArgument)).toBe(false);
  expect(final('this server requires "Authorization: Bearer <token>"', Code.Unauthenticated)).toBe(true);
  expect(final("start.queue: not permitted", Code.PermissionDenied)).toBe(true);
  expect(final("HTTP 404", Code.Unimplemented)).toBe(true);
  for (const code of [
    Code.Unavailable,
    Code.Internal,
    Code.ResourceExhausted,
    Code.Aborted,
    Code.DeadlineExceeded,
    Code.Canceled,
    Code.Unknown,
  ]) {
    expect(final("passing", code), Code[code]).toBe(false);
  }
});
