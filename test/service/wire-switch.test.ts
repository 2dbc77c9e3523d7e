/**
 * LEASEQUEUE_WIRE (docs/performance.md "The fast wire"): with `fast` a
 * binary client's SubmitBatch answer and Claim leases are encoded by hand
 * (carried as unknown fields the client reads as the messages); with
 * `library` they are messages for protobuf-es to serialize. The service
 * tests run both ways (vitest.config.ts, project "library").
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ClaimRequestSchema,
  SubmitBatchRequestSchema,
  type ClaimResponse,
  type SubmitBatchResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ClaimStreams } from "../../src/dispatch/claim-streams.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { HAND_ENCODERS } from "../../src/server/fast-wire/index.js";
import { jobHandlers } from "../../src/service/job-handlers.js";
import { leaseHandlers } from "../../src/service/lease-handlers.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { grpcHandlerContext } from "../helpers/handler-context.js";

let dir: string;
let store: SqliteStore;
const clock = new ManualClock();
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-wire-"));
  store = openSqliteStore({ path: join(dir, "jobs.db"), clock });
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.each([
  ["fast", HAND_ENCODERS],
  ["library", undefined],
])("LEASEQUEUE_WIRE=%s", (_wire, handEncoders) => {
  const handEncoding = handEncoders !== undefined;
  it(handEncoding ? "encodes a binary client's answers by hand" : "answers a binary client with messages", async () => {
    const jobs = jobHandlers({ store, clock, handEncoders });
    const request = create(SubmitBatchRequestSchema, { jobs: [{ queue: "q", task: "t" }] });
    const submitted = (await jobs.submitBatch(request, grpcHandlerContext("submitBatch"))) as SubmitBatchResponse;
    expect(submitted.results.length).toBe(handEncoding ? 0 : 1);
    expect(submitted.$unknown?.length ?? 0).toBe(handEncoding ? 1 : 0);

    const wakeups = new QueueWakeups(store, clock);
    const claimStreams = new ClaimStreams({ store, wakeups, clock, log: silentLogger, keepaliveMs: 60_000 });
    try {
      const leases = leaseHandlers({ store, clock, wakeups, claimStreams, log: silentLogger, handEncoders });
      const claimed = (await leases.claim(
        create(ClaimRequestSchema, { queue: "q", workerId: "w" }),
        grpcHandlerContext("claim"),
      )) as ClaimResponse;
      expect(claimed.leases.length).toBe(handEncoding ? 0 : 1);
      expect(claimed.$unknown?.length ?? 0).toBe(handEncoding ? 1 : 0);
    } finally {
      claimStreams.close();
      wakeups.close();
    }
  });
});
