import http2 from "node:http2";
import { EventEmitter, once } from "node:events";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { HealthStatus, registerHealth, ServingStatus } from "../../src/server/health.js";

const LQ = "leasequeue.v1.LeaseQueueService";

/** Counts the Watch handlers currently blocked in changed(), and announces each change of that count. */
class TrackedHealth extends HealthStatus {
  waiting = 0;
  readonly events = new EventEmitter();

  override async changed(service: string, signal?: AbortSignal): Promise<void> {
    this.#count(+1);
    try {
      await super.changed(service, signal);
    } finally {
      this.#count(-1);
    }
  }

  #count(delta: number) {
    this.waiting += delta;
    this.events.emit("waiting", this.waiting);
  }

  async untilWaiting(n: number): Promise<void> {
    while (this.waiting !== n) await once(this.events, "waiting");
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
  vi.restoreAllMocks();
});

async function start(health: HealthStatus, shutdownSignal?: AbortSignal): Promise<Client<typeof Health>> {
  const server = http2.createServer(connectNodeAdapter({ routes: (r) => registerHealth(r, health), shutdownSignal }));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(async () => {
    for (const s of sessions) s.destroy();
    server.close();
    await once(server, "close");
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return createClient(Health, createGrpcTransport({ baseUrl }));
}

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return ConnectError.from(e).code;
  }
}

describe("HealthStatus", () => {
  it('starts with "" SERVING and only announces real changes', async () => {
    const health = new HealthStatus();
    expect(health.get("")).toBe(ServingStatus.SERVING);
    expect(health.get(LQ)).toBeUndefined();
    const changed = health.changed("");
    health.set("", ServingStatus.SERVING); // same value: no event
    health.set(LQ, ServingStatus.SERVING); // other service: no event for ""
    let fired = false;
    void changed.then(() => (fired = true));
    await Promise.resolve();
    expect(fired).toBe(false);
    health.set("", ServingStatus.NOT_SERVING);
    await changed;
    expect([...health.list()]).toEqual([
      ["", ServingStatus.NOT_SERVING],
      [LQ, ServingStatus.SERVING],
    ]);
  });

  it("accepts initial statuses", () => {
    const health = new HealthStatus({ "": ServingStatus.NOT_SERVING });
    expect(health.get("")).toBe(ServingStatus.NOT_SERVING);
  });
});

describe("grpc.health.v1.Health", () => {
  it("Check answers known services and NOT_FOUND for unknown ones", async () => {
    const health = new HealthStatus();
    const client = await start(health);
    expect((await client.check({})).status).toBe(ServingStatus.SERVING);
    health.set("", ServingStatus.NOT_SERVING);
    health.set(LQ, ServingStatus.SERVING);
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
    expect((await client.check({ service: LQ })).status).toBe(ServingStatus.SERVING);
    expect(await codeOf(client.check({ service: "nope" }))).toBe(Code.NotFound);
  });

  it("Check and List bring the statuses up to date first, and a failing refresh leaves them as they are", async () => {
    let refreshes = 0;
    let failRefresh = false;
    const health: HealthStatus = new HealthStatus(
      { "": ServingStatus.SERVING },
      {
        // eslint-disable-next-line @typescript-eslint/require-await -- async so that the throw below is a rejection, as a real refresh's failure is
        refresh: async () => {
          refreshes++;
          if (failRefresh) throw new Error("cannot find out");
          health.set("", ServingStatus.NOT_SERVING);
        },
      },
    );
    const client = await start(health);
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
    expect(refreshes).toBe(1);
    health.set("", ServingStatus.SERVING);
    failRefresh = true;
    expect((await client.check({ service: "" })).status).toBe(ServingStatus.SERVING);
    expect((await client.list({})).statuses[""]?.status).toBe(ServingStatus.SERVING);
    expect(refreshes).toBe(3);
  });

  it("List returns every known service", async () => {
    const health = new HealthStatus();
    health.set(LQ, ServingStatus.NOT_SERVING);
    const client = await start(health);
    const res = await client.list({});
    expect(Object.fromEntries(Object.entries(res.statuses).map(([k, v]) => [k, v.status]))).toEqual({
      "": ServingStatus.SERVING,
      [LQ]: ServingStatus.NOT_SERVING,
    });
  });

  it("Watch sends the current status at once, then each change", async () => {
    const health = new TrackedHealth();
    const client = await start(health);
    const abort = new AbortController();
    const stream = client.watch({ service: "" }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVING);

    health.set("", ServingStatus.NOT_SERVING);
    expect((await stream.next()).value?.status).toBe(ServingStatus.NOT_SERVING);
    await health.untilWaiting(1);
    health.set("", ServingStatus.NOT_SERVING); // no change, no message
    health.set("", ServingStatus.SERVING);
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVING);
    abort.abort();
    await health.untilWaiting(0);
  });

  it("Watch of an unknown service sends SERVICE_UNKNOWN and stays open until it appears", async () => {
    const health = new TrackedHealth();
    const client = await start(health);
    const abort = new AbortController();
    const stream = client.watch({ service: LQ }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVICE_UNKNOWN);
    await health.untilWaiting(1); // the call is still open, waiting for a change
    health.set(LQ, ServingStatus.SERVING);
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVING);
    abort.abort();
    await health.untilWaiting(0);
  });

  it("Watch stops waiting when the client goes away, without logging a failure", async () => {
    const errors = vi.spyOn(console, "error");
    const health = new TrackedHealth();
    const client = await start(health);
    const abort = new AbortController();
    const stream = client.watch({ service: "" }, { signal: abort.signal })[Symbol.asyncIterator]();
    await stream.next();
    await health.untilWaiting(1);
    const pending = stream.next();
    abort.abort();
    expect(await codeOf(pending)).toBe(Code.Canceled);
    await health.untilWaiting(0);
    expect(errors).not.toHaveBeenCalled();
  });

  it("Watch ends with the shutdown reason when the server shuts down", async () => {
    const health = new TrackedHealth();
    const shutdown = new AbortController();
    const client = await start(health, shutdown.signal);
    const stream = client.watch({ service: "" })[Symbol.asyncIterator]();
    await stream.next();
    await health.untilWaiting(1);
    const pending = stream.next();
    shutdown.abort(new ConnectError("server is shutting down", Code.Unavailable));
    expect(await codeOf(pending)).toBe(Code.Unavailable);
    await health.untilWaiting(0);
  });

  it("Watch honours the client deadline", async () => {
    const health = new HealthStatus();
    const client = await start(health);
    const stream = client.watch({ service: "" }, { timeoutMs: 50 })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.status).toBe(ServingStatus.SERVING);
    expect(await codeOf(stream.next())).toBe(Code.DeadlineExceeded);
  });
});
