/**
 * What a store last saw of the queue controls (store/reads/known-queue-controls.ts):
 * the changes a snapshot of the database shows, and the queues a snapshot
 * cannot be trusted for because the store itself is changing them.
 */
import { describe, expect, it } from "vitest";
import { KnownQueueControls } from "../../src/store/reads/known-queue-controls.js";
import { NO_GROUP_RULES } from "../helpers/store.js";

const limits = { maxRunning: 2, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES };

describe("KnownQueueControls", () => {
  it("reports what another server changed since the last snapshot, once", () => {
    const known = new KnownQueueControls({ paused: ["a"], configs: [] });
    expect(known.changesTo({ paused: ["b"], configs: [{ queue: "c", ...limits }] })).toEqual([
      { queue: "b", paused: true },
      { queue: "a", paused: false },
      { queue: "c", paused: false, config: limits },
    ]);
    expect(known.changesTo({ paused: ["b"], configs: [{ queue: "c", ...limits }] })).toEqual([]);
  });

  it("leaves the queues the store is changing as it noted them, whichever state the snapshot caught", () => {
    const known = new KnownQueueControls({ paused: [], configs: [] });
    // The store pauses "billing"; a snapshot read while that commit is in flight still shows it unpaused...
    known.note([{ queue: "billing", paused: true }]);
    expect(known.changesTo({ paused: [], configs: [] }, new Set(["billing"]))).toEqual([]);
    // ...and one that shows it paused before the store noted it is no news either.
    const fresh = new KnownQueueControls({ paused: [], configs: [] });
    expect(fresh.changesTo({ paused: ["billing"], configs: [{ queue: "billing", ...limits }] }, new Set(["billing"]))).toEqual([]);
    fresh.note([{ queue: "billing", paused: true, config: limits }]);
    // Settled, the next snapshot is compared as usual.
    expect(fresh.changesTo({ paused: ["billing"], configs: [{ queue: "billing", ...limits }] })).toEqual([]);
    expect(fresh.changesTo({ paused: [], configs: [] })).toEqual([
      { queue: "billing", paused: false },
      {
        queue: "billing",
        paused: false,
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
      },
    ]);
  });

  it("answers the noted changes that are news: a notification of what a catch-up already announced is none", () => {
    const known = new KnownQueueControls({ paused: ["billing"], configs: [] });
    // Another server resumed "billing"; the catch-up read it before its notification arrived.
    expect(known.changesTo({ paused: [], configs: [] })).toEqual([{ queue: "billing", paused: false }]);
    expect(known.note([{ queue: "billing", paused: false }])).toEqual([]);
    // A change of limits is news once, paused or not.
    expect(known.note([{ queue: "billing", paused: false, config: limits }])).toEqual([
      { queue: "billing", paused: false, config: limits },
    ]);
    expect(known.note([{ queue: "billing", paused: false, config: limits }])).toEqual([]);
    expect(known.note([{ queue: "billing", paused: true }])).toEqual([{ queue: "billing", paused: true }]);
  });
});
