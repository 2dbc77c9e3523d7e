/**
 * The service called directly (no transport), for the moments a real
 * network cannot time: a caller that goes away exactly while its claim
 * commits. A lease the server claimed but can no longer send is released
 * (RELEASED event, attempt refunded), never left RUNNING for nobody.
 */
import { JobWaiters } from "../../src/dispatch/job-waiters.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServiceImpl } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ClaimStreams } from "../../src/dispatch/claim-streams.js";
import { EventFeed } from "../../src/dispatch/event-feed.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { createLeaseQueueService } from "../../src/service/leasequeue-service.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";
import { ClaimRequestSchema, LeaseQueueService, StreamClaimsRequestSchema } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { newJob } from "../store/contract/helpers.js";
import { grpcHandlerContext } from "../helpers/handler-context.js";

let dir: string;
let store: SqliteStore;
let clock: ManualClock;
let wakeups: QueueWakeups;
let claimStreams: ClaimStreams;
let events: EventFeed;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "lq-claim-delivery-"));
  clock = new ManualClock();
  store = openSqliteStore({ path: join(dir, "jobs.db"), clock });
  wakeups = new QueueWakeups(store, clock);
  claimStreams = new ClaimStreams({ store, wakeups, clock, log: silentLogger, keepaliveMs: 60_000 });
  events = new EventFeed(store);
});

afterEach(async () => {
  claimStreams.close();
  wakeups.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function service(overrides: { store?: Store; claimStreams?: ClaimStreams } = {}): ServiceImpl<typeof LeaseQueueService> {
  const jobWaiters = new JobWaiters(overrides.store ?? store);
  return createLeaseQueueService({ store, clock, wakeups, claimStreams, events, jobWaiters, log: silentLogger, ...overrides });
}

/** `target` with one method replaced (a Proxy: the classes keep private fields). */
function withMethod<T extends object>(target: T, name: keyof T, replacement: unknown): T {
  return new Proxy(target, {
    get(t, prop) {
      if (prop === name) return replacement;
      const value = Reflect.get(t, prop, t) as unknown;
      return typeof value === "function" ? value.bind(t) : value;
    },
  });
}

async function kindsOf(jobId: string): Promise<string[]> {
  return (await store.listJobEvents(jobId)).map((e) => e.kind);
}

it("a Claim whose caller went away while the claim committed releases its leases, attempts refunded", async () => {
  const [a, b] = await store.submit([newJob({ queue: "gone" }), newJob({ queue: "gone" })]);
  const ctx = grpcHandlerContext("claim");
  // The caller disconnects exactly while the claim transaction commits.
  const goneDuringClaim = withMethod<Store>(store, "claimOutcome", async (spec: Parameters<Store["claimOutcome"]>[0]) => {
    const outcome = await store.claimOutcome(spec);
    ctx.abort(new Error("client went away"));
    return outcome;
  });
  const res = await service({ store: goneDuringClaim }).claim(
    create(ClaimRequestSchema, { queue: "gone", workerId: "w", maxJobs: 2 }),
    ctx,
  );
  expect(res).toEqual({ leases: [], results: [] });
  for (const { job } of [a, b]) {
    expect(await store.getJob(job.id)).toMatchObject({ state: "queued", attempts: 0, deliveries: 1, workerId: null });
    expect(await kindsOf(job.id)).toEqual(["submitted", "claimed", "released"]);
  }
});

it("a StreamClaims that ends while a lease is on its way out releases that lease", async () => {
  const [outcome] = await store.submit([newJob({ queue: "gone-stream" })]);
  const job = outcome.job;
  const ctx = grpcHandlerContext("streamClaims");
  // The stream's caller goes at the moment the dispatcher hands the lease to the handler.
  const endsOnLease = withMethod(claimStreams, "open", (spec: Parameters<ClaimStreams["open"]>[0], signal: AbortSignal) =>
    (async function* () {
      for await (const lease of claimStreams.open(spec, signal)) {
        if (lease !== null) ctx.abort(new Error("client went away"));
        yield lease;
      }
    })(),
  );
  const sent: unknown[] = [];
  const stream = service({ claimStreams: endsOnLease }).streamClaims(
    create(StreamClaimsRequestSchema, { queue: "gone-stream", workerId: "w", maxInFlight: 1 }),
    ctx,
  );
  await expect(
    (async () => {
      for await (const message of stream) sent.push(message);
    })(),
  ).rejects.toThrow(/client went away/);
  expect(sent).toEqual([{}]); // the first keepalive only: the lease was never sent
  expect(await store.getJob(job.id)).toMatchObject({ state: "queued", attempts: 0, deliveries: 1 });
  expect(await kindsOf(job.id)).toEqual(["submitted", "claimed", "released"]);
});
