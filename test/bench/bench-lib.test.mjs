// The bench's own logic that its figures depend on: the exactly-once check,
// the percentile, the /proc readers, the CPU profile summary and the choice
// of driver from the service descriptor. (The bench itself is `npm run bench`.)
import { describe, expect, it } from "vitest";
import * as pb from "../../dist/gen/ts/leasequeue/v1/leasequeue_pb.js";
import { LAYERS, layerBudget, layerOf, topSelfTime } from "../../bench/lib/cpu-profile.mjs";
import { groupKeyOf, selectDriver } from "../../bench/lib/leasequeue-drivers.mjs";
import { processCpuMs, processMemory } from "../../bench/lib/proc.mjs";
import { compareGroupsToBatched } from "../../bench/lib/report.mjs";
import { latencySummary, percentile } from "../../bench/lib/timing.mjs";
import { verifyExactlyOnce } from "../../bench/lib/verify.mjs";

describe("verifyExactlyOnce", () => {
  it("accepts every index once, spread over workers", () => {
    expect(verifyExactlyOnce([Int32Array.from([0, 2]), Int32Array.from([1, 3])], 4)).toEqual({
      ok: true,
      completions: 4,
      duplicates: 0,
      missing: 0,
      outOfRange: 0,
    });
  });
  it("reports a duplicate and the job it displaced", () => {
    expect(verifyExactlyOnce([Int32Array.from([0, 1]), Int32Array.from([1, 3])], 4)).toEqual({
      ok: false,
      completions: 4,
      duplicates: 1,
      missing: 1,
      outOfRange: 0,
    });
  });
  it("counts many duplicates of one job, and indexes out of range", () => {
    const r = verifyExactlyOnce([new Int32Array(300).fill(0), Int32Array.from([9])], 2);
    expect(r).toEqual({ ok: false, completions: 301, duplicates: 299, missing: 1, outOfRange: 1 });
  });
});

describe("percentile", () => {
  it("takes the nearest rank", () => {
    const s = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(s, 50)).toBe(50);
    expect(percentile(s, 99)).toBe(99);
    expect(percentile(s, 100)).toBe(100);
    expect(latencySummary([3, 1, 2])).toMatchObject({ samples: 3, p50: 2, max: 3 });
  });
});

describe("/proc readers", () => {
  it("read this process's CPU and peak RSS", () => {
    const mem = processMemory(process.pid);
    expect(mem.peakRssBytes).toBeGreaterThanOrEqual(mem.rssBytes);
    expect(mem.rssBytes).toBeGreaterThan(1024 * 1024);
    expect(processCpuMs(process.pid)).toBeGreaterThan(0);
    expect(processCpuMs(2 ** 30)).toBeNull();
  });
});

describe("topSelfTime", () => {
  it("sums self time per function over samples", () => {
    const profile = {
      nodes: [
        { id: 1, callFrame: { functionName: "(root)", url: "", lineNumber: -1 } },
        { id: 2, callFrame: { functionName: "commit", url: "file:///x/dist/src/store/sqlite/sqlite-store.js", lineNumber: 9 } },
        { id: 3, callFrame: { functionName: "encode", url: "file:///x/node_modules/@bufbuild/protobuf/dist/x.js", lineNumber: 0 } },
        { id: 4, callFrame: { functionName: "(idle)", url: "", lineNumber: -1 } },
      ],
      samples: [2, 3, 4, 2, 2, 4],
      timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000],
    };
    const { top, idleShare, totalMs, byArea } = topSelfTime(profile, 2);
    expect(byArea.map((a) => a.area)).toEqual(["server: store (the SQL statements run from here)", "protobuf-es (encode/decode)"]);
    expect(totalMs).toBe(6);
    expect(idleShare).toBeCloseTo(1 / 3, 3);
    expect(top[0]).toEqual({ fn: "commit", where: "dist/src/store/sqlite/sqlite-store.js:10", selfMs: 3, share: 0.75 });
    expect(top[1]).toMatchObject({ fn: "encode", where: "node_modules/@bufbuild/protobuf/dist/x.js:1", share: 0.25 });
  });
  it("keeps only the samples of a window, in the profile's microsecond clock", () => {
    const profile = {
      startTime: 10_000,
      nodes: [
        { id: 1, callFrame: { functionName: "start", url: "file:///x/dist/src/app.js", lineNumber: 0 } },
        { id: 2, callFrame: { functionName: "commit", url: "file:///x/dist/src/store/sqlite/sqlite-store.js", lineNumber: 9 } },
        { id: 3, callFrame: { functionName: "(idle)", url: "", lineNumber: -1 } },
      ],
      // taken at 11,000 .. 16,000 us
      samples: [1, 1, 2, 3, 2, 1],
      timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000],
    };
    const { top, totalMs, idleShare } = topSelfTime(profile, 5, { fromUs: 13_000, toUs: 15_000 });
    expect(totalMs).toBe(3);
    expect(idleShare).toBeCloseTo(1 / 3, 3);
    expect(top).toEqual([{ fn: "commit", where: "dist/src/store/sqlite/sqlite-store.js:10", selfMs: 2, share: 1 }]);
  });
});

describe("the CPU budget by layer", () => {
  it("charges each function to the layer of its file", () => {
    const at = (where, fn = "f") => layerOf({ fn, where });
    expect(at("node:internal/http2/core:1")).toBe("transport and framing");
    expect(at("node_modules/@connectrpc/connect-node/dist/esm/x.js:3")).toBe("transport and framing");
    expect(at("dist/src/server/grpc-unary.js:10")).toBe("transport and framing");
    expect(at("node_modules/@bufbuild/protobuf/dist/esm/wire/binary-encoding.js:1")).toBe("message codecs");
    expect(at("dist/gen/ts/leasequeue/v1/leasequeue_pb.js:1")).toBe("message codecs");
    expect(at("dist/src/server/fast-wire/lease-encoding.js:40")).toBe("message codecs");
    expect(at("dist/src/server/fast-wire/grpc-unary.js:40")).toBe("transport and framing");
    expect(at("dist/src/service/ack-decoding.js:40")).toBe("message codecs"); // a build from before src/server/fast-wire/
    expect(at("dist/src/service/validate.js:40")).toBe("validation and mapping");
    expect(at("dist/src/dispatch/claim-streams.js:40")).toBe("dispatch");
    expect(at("dist/src/store/sqlite/sqlite-port.js:40")).toBe("store");
    expect(at("node_modules/pg-protocol/dist/parser.js:1")).toBe("store");
    expect(at("", "(garbage collector)")).toBe("garbage collector");
    expect(at("dist/src/domain/state-machine.js:1")).toBe(LAYERS[6]);
    expect(at("", "(program)")).toBe(LAYERS[7]);
  });
  it("sums every thread's samples per job and names what the samples do not cover", () => {
    const thread = (entries) => ({ byLayer: LAYERS.map((layer) => ({ layer, selfMs: entries[layer] ?? 0 })) });
    const main = thread({ "transport and framing": 30, "message codecs": 20, "garbage collector": 10 });
    const store = thread({ store: 40, "garbage collector": 5 });
    const budget = layerBudget([main, store], 1000, 0.15);
    expect(budget.find((l) => l.layer === "transport and framing").msPerJob).toBe(0.03);
    expect(budget.find((l) => l.layer === "garbage collector").msPerJob).toBe(0.015);
    expect(budget.find((l) => l.layer === "store").msPerJob).toBe(0.04);
    expect(budget.at(-1)).toEqual({ layer: expect.stringMatching(/^outside the JavaScript threads/), msPerJob: 0.045 });
  });
});

describe("selectDriver", () => {
  it("runs today's descriptor with SubmitBatch + Work, and falls back to StreamClaims + Complete without Work", () => {
    const { driver, unusedBatchedRpcs } = selectDriver("batched", pb.LeaseQueueService, pb);
    expect(driver.calls).toEqual(["submitBatch", "work"]);
    expect(unusedBatchedRpcs).toEqual(["acknowledge"]);
    const { work: _work, acknowledge: _ack, ...older } = pb.LeaseQueueService.method;
    expect(selectDriver("batched", { method: older }, pb).driver.calls).toEqual(["submitBatch", "streamClaims", "complete"]);
    expect(selectDriver("unary", pb.LeaseQueueService, pb).driver.calls).toEqual(["submit", "claim", "complete"]);
  });
  it("names section-A RPCs that the descriptor has and the chosen driver does not use", () => {
    const service = { method: { ...pb.LeaseQueueService.method, work: {}, acknowledge: {} } };
    const { driver, unusedBatchedRpcs } = selectDriver("batched", service, pb);
    if (driver.calls.includes("work")) expect(unusedBatchedRpcs).not.toContain("work");
    else expect(unusedBatchedRpcs).toEqual(["work", "acknowledge"]);
  });
  it("refuses a descriptor without the RPCs of any driver", () => {
    expect(() => selectDriver("batched", { method: { submit: {} } }, pb)).toThrow(/lacks the RPCs/);
  });
  it("takes the driver a scenario names, if the descriptor has its RPCs and request fields", () => {
    const { driver } = selectDriver("unary", pb.LeaseQueueService, pb, "submit+claim-with-acks");
    expect(driver.calls).toEqual(["submit", "claim"]);
    expect(driver.callsPerJob).toBe(2);
    const withoutAcks = { ...pb, ClaimRequestSchema: { field: { ...pb.ClaimRequestSchema.field, acks: undefined } } };
    expect(() => selectDriver("unary", pb.LeaseQueueService, withoutAcks, "submit+claim-with-acks")).toThrow(/lacks what/);
    expect(() => selectDriver("unary", pb.LeaseQueueService, pb, "no-such-driver")).toThrow(/no unary driver no-such-driver/);
  });
});

describe("groupKeyOf", () => {
  it("spreads consecutive jobs over every group, and gives none without groups", () => {
    expect([0, 1, 2, 3, 4].map((i) => groupKeyOf(i, 3))).toEqual(["g0", "g1", "g2", "g0", "g1"]);
    expect(new Set(Array.from({ length: 50_000 }, (_, i) => groupKeyOf(i, 10_000))).size).toBe(10_000);
    expect(groupKeyOf(7, 0)).toBe("");
  });
});

describe("compareGroupsToBatched", () => {
  const row = (key, { jobsPerSec, srv, claim, engine = "sqlite", db = 0, ...rest }) => ({
    key,
    engine,
    system: "leasequeue",
    outcome: "handled",
    check: { ok: true },
    e2eJobsPerSec: jobsPerSec,
    serverCpuMsPerJob: srv,
    dbCpuMsPerJob: db,
    totalCpuMsPerJob: srv + db + 0.1,
    claimPhase:
      claim === undefined
        ? undefined
        : {
            jobsPerSec: claim.jobsPerSec,
            serverCpuMsPerJob: claim.srv,
            dbCpuMsPerJob: db,
            totalCpuMsPerJob: claim.srv + db,
            gate: { groups: 10_000 },
          },
    ...rest,
  });
  it("compares claim phases when every (b) has one, over the means of each side", () => {
    const [cmp] = compareGroupsToBatched([
      row("b", { jobsPerSec: 2000, srv: 0.3, claim: { jobsPerSec: 4000, srv: 0.2 } }),
      row("e", { jobsPerSec: 1000, srv: 0.5, claim: { jobsPerSec: 1000, srv: 0.5 } }),
      row("e", { jobsPerSec: 1000, srv: 0.5, claim: { jobsPerSec: 3000, srv: 0.3 } }),
      row("b", { jobsPerSec: 2000, srv: 0.3, claim: { jobsPerSec: 2000, srv: 0.2 } }),
      // left out: a pinned row, another engine's (b), a run that lost a job
      row("b", { jobsPerSec: 9000, srv: 0.01, claim: { jobsPerSec: 9000, srv: 0.01 }, serverCpus: { taskset: "taskset -c 0" } }),
      row("b", { jobsPerSec: 9000, srv: 0.01, claim: { jobsPerSec: 9000, srv: 0.01 }, engine: "postgres" }),
      row("b", { jobsPerSec: 9000, srv: 0.01, claim: { jobsPerSec: 9000, srv: 0.01 }, check: { ok: false } }),
    ]);
    expect(cmp.engine).toBe("sqlite");
    expect(cmp.basis).toMatch(/^claim phase/);
    expect(cmp.b.runs).toHaveLength(2);
    expect(cmp.e.jobsPerSec).toBe(2000);
    expect(cmp.costRatio).toBeCloseTo(0.4 / 0.2);
    expect(cmp.timeRatio).toBeCloseTo(3000 / 2000);
    expect(cmp.met).toBe(true);
    expect(cmp.groupsAtClaimStart).toEqual([10_000, 10_000]);
  });
  it("counts the database's CPU on PostgreSQL, and judges over 2x as not met", () => {
    const [cmp] = compareGroupsToBatched([
      row("b", { engine: "postgres", db: 0.1, jobsPerSec: 1, srv: 1, claim: { jobsPerSec: 3000, srv: 0.2 } }),
      row("e", { engine: "postgres", db: 0.1, jobsPerSec: 1, srv: 1, claim: { jobsPerSec: 2000, srv: 0.8 } }),
    ]);
    expect(cmp.costRatio).toBeCloseTo(0.9 / 0.3);
    expect(cmp.met).toBe(false);
  });
  it("falls back to whole job lives when a (b) has no claim phase, without judging the target", () => {
    const [cmp] = compareGroupsToBatched([
      row("b", { jobsPerSec: 3000, srv: 0.25 }),
      row("e", { jobsPerSec: 2000, srv: 0.4, claim: { jobsPerSec: 2500, srv: 0.3 } }),
    ]);
    expect(cmp.basis).toMatch(/^whole job life/);
    expect(cmp.costRatio).toBeCloseTo(0.4 / 0.25);
    expect(cmp.timeRatio).toBeCloseTo(1.5);
    expect(cmp.met).toBeNull();
  });
  it("says what is missing when (b) did not run", () => {
    expect(compareGroupsToBatched([row("e", { jobsPerSec: 1, srv: 1, claim: { jobsPerSec: 1, srv: 1 } })])).toEqual([
      { engine: "sqlite", missing: "no (b) row of this engine completed every job exactly once" },
    ]);
    expect(compareGroupsToBatched([row("b", { jobsPerSec: 1, srv: 1 })])).toEqual([]);
  });
});
