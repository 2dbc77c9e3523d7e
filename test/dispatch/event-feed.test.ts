/**
 * The WatchEvents feed over a real SQLite store (temp file, manual clock):
 * the live start, the replay/live seam with commits landing mid-replay,
 * filters, out-of-range resume points, the slow-subscriber bound, keepalives
 * and the one-subscription fan-out.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import type { JobEvent } from "../../src/domain/job.js";
import { EventFeed, type EventFeedOptions, type WatchSpec } from "../../src/dispatch/event-feed.js";
import { QueueError } from "../../src/domain/errors.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases } from "../helpers/store.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

function setup(options: EventFeedOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-feed-"));
  const clock = new ManualClock();
  const store = openSqliteStore({ path: join(dir, "jobs.db"), clock, synchronous: "normal" });
  const feed = new EventFeed(store, options);
  cleanups.push(async () => {
    feed.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, feed, clock };
}

/** Commits one transaction that submits `n` jobs (one SUBMITTED event each); returns their events' sequences. */
async function submit(store: SqliteStore, n = 1, queue = "billing"): Promise<number[]> {
  const before = (await store.eventBounds()).latest;
  await store.submit(Array.from({ length: n }, () => newJob({ queue })));
  const after = (await store.eventBounds()).latest;
  return Array.from({ length: after - before }, (_, i) => before + 1 + i);
}

/** The feed one event at a time: batches of one, so an event counts as waiting until it is handed out. */
async function* oneByOne(feed: EventFeed, spec: WatchSpec, signal: AbortSignal): AsyncGenerator<JobEvent | null, void, undefined> {
  for await (const batch of feed.watchBatches(spec, signal, { maxBatch: 1 })) {
    if (batch === null) yield null;
    else yield* batch;
  }
}

function watch(feed: EventFeed, spec: WatchSpec = {}) {
  const abort = new AbortController();
  const it = oneByOne(feed, spec, abort.signal);
  cleanups.push(async () => {
    abort.abort();
    await it.return();
  });
  return {
    abort,
    it,
    /** Next item: an event, or null for a keepalive. */
    async next(): Promise<JobEvent | null> {
      const r = await it.next();
      if (r.done) throw new Error("watch ended");
      return r.value;
    },
    /** Next event, skipping keepalives. */
    async event(): Promise<JobEvent> {
      for (;;) {
        const item = await this.next();
        if (item !== null) return item;
      }
    },
  };
}

async function feedError(promise: Promise<unknown>): Promise<QueueError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(QueueError);
    return err as QueueError;
  }
  throw new Error("expected the watch to fail");
}

describe("a watch without after_sequence", () => {
  it("starts with a keepalive once registered, then gets only events committed after it", async () => {
    const { store, feed } = setup();
    await submit(store, 3);
    const w = watch(feed);
    expect(await w.next()).toBeNull();
    expect(feed.stats.subscribers).toBe(1);

    const [seq] = await submit(store);
    const e = await w.event();
    expect(e).toMatchObject({ sequence: seq, kind: "submitted", queue: "billing", toState: "queued" });
    expect(feed.stats.eventsSent).toBe(1);
  });

  it("delivers each event of one commit, in sequence order", async () => {
    const { store, feed } = setup();
    const w = watch(feed);
    await w.next();
    const seqs = await submit(store, 5);
    const got: number[] = [];
    for (const _ of seqs) got.push((await w.event()).sequence);
    expect(got).toEqual(seqs);
  });
});

describe("a watch with after_sequence", () => {
  it("replays every stored event after it, then continues live, with commits landing mid-replay each delivered once", async () => {
    // Small pages so the replay takes many reads, with commits between them.
    const { store, feed } = setup({ pageSize: 3 });
    const stored = await submit(store, 20);
    const w = watch(feed, { afterSequence: stored[4] });
    expect(await w.next()).toBeNull();

    const got: number[] = [];
    for (let i = 0; i < 120; i++) {
      got.push((await w.event()).sequence);
      // First commits outpace the replay (two events per event read), then
      // they slow down (one per three reads) so it catches up while they go
      // on; once caught up, each read needs a commit.
      const caughtUp = got.at(-1) === (await store.eventBounds()).latest;
      if (i < 15 || i % 3 === 0 || caughtUp) await submit(store, i < 15 ? 2 : 1);
    }
    // A duplicate or a gap would show before this last event.
    const [marker] = await submit(store);
    while (got.at(-1)! < marker) got.push((await w.event()).sequence);

    const expected = (await store.listEvents({ afterSequence: stored[4], limit: 10_000 })).map((e) => e.sequence);
    expect(got).toEqual(expected);
    expect(expected).toHaveLength(marker - stored[4]);
  });

  it("reads the store again when its buffer overflowed while the last replay page was being sent", async () => {
    const { store, feed } = setup({ pageSize: 4, bufferLimit: 5 });
    await submit(store, 6);
    const w = watch(feed, { afterSequence: 0 });
    expect(await w.next()).toBeNull();
    const got: number[] = [];
    for (let i = 0; i < 5; i++) got.push((await w.event()).sequence);
    // Sequence 5 came from the second, short page. Eight events in one commit
    // overflow the buffer: six of them exist only in the store now.
    await submit(store, 8);
    const [marker] = await submit(store);
    while (got.at(-1)! < marker) got.push((await w.event()).sequence);
    expect(got).toEqual(Array.from({ length: marker }, (_, i) => i + 1));
    expect(feed.stats.dropped.buffer_full).toBe(0);
  });

  it("survives buffer overflows during a long replay by reading on from the store, without losing or repeating events", async () => {
    const { store, feed } = setup({ pageSize: 4, bufferLimit: 5 });
    const stored = await submit(store, 12);
    const w = watch(feed, { afterSequence: 0 });
    expect(await w.next()).toBeNull();

    const got: number[] = [];
    for (let i = 0; i < 10; i++) {
      got.push((await w.event()).sequence);
      // Eight events in one commit: more than the buffer holds.
      if (i % 3 === 0) await submit(store, 8);
    }
    const [marker] = await submit(store);
    while (got.at(-1)! < marker) got.push((await w.event()).sequence);

    expect(got).toEqual(Array.from({ length: marker }, (_, i) => i + 1));
    expect(got.slice(0, stored.length)).toEqual(stored);
    expect(feed.stats.dropped.buffer_full).toBe(0);
  });

  it("with after_sequence equal to the latest sequence, behaves like a live watch", async () => {
    const { store, feed } = setup();
    const stored = await submit(store, 3);
    const w = watch(feed, { afterSequence: stored[2] });
    expect(await w.next()).toBeNull();
    const [next] = await submit(store);
    expect((await w.event()).sequence).toBe(next);
  });

  it("with after_sequence 0 on an empty database, waits for the first event", async () => {
    const { store, feed } = setup();
    const w = watch(feed, { afterSequence: 0 });
    expect(await w.next()).toBeNull();
    await submit(store);
    expect((await w.event()).sequence).toBe(1);
  });
});

describe("resume points that cannot be honoured", () => {
  it("fail with REPLAY_TOO_OLD when events after the resume point were pruned, naming the oldest available sequence", async () => {
    const { store, feed } = setup();
    const stored = await submit(store, 10);
    store.db.prepare("DELETE FROM job_events WHERE sequence <= ?").run(stored[3]);
    const oldest = stored[4];

    const err = await feedError(watch(feed, { afterSequence: oldest - 2 }).next());
    expect(err.reason).toBe("REPLAY_TOO_OLD");
    expect(err.message).toContain(`oldest available sequence is ${oldest}`);
    expect(err.message).toContain(`after_sequence=${oldest - 1}`);
    expect(feed.stats.subscribers).toBe(0);

    // Starting right before the oldest kept event is complete: nothing was lost.
    const w = watch(feed, { afterSequence: oldest - 1 });
    expect(await w.next()).toBeNull();
    expect((await w.event()).sequence).toBe(oldest);
  });

  it("fail with REPLAY_TOO_OLD when every event was pruned and the resume point is before the last one issued", async () => {
    const { store, feed } = setup();
    const stored = await submit(store, 4);
    store.db.prepare("DELETE FROM job_events").run();
    const err = await feedError(watch(feed, { afterSequence: stored[1] }).next());
    expect(err.reason).toBe("REPLAY_TOO_OLD");
    expect(err.message).toContain(`oldest available sequence is ${stored[3] + 1}`);

    const w = watch(feed, { afterSequence: stored[3] });
    expect(await w.next()).toBeNull();
    const [next] = await submit(store);
    expect((await w.event()).sequence).toBe(next);
  });

  it("fail with REPLAY_TOO_OLD when retention pruned events after the resume point, though older events of a live job remain", async () => {
    const { store, feed, clock } = setup();
    // An old job that is still waiting (its SUBMITTED event is the oldest stored), then a job that completes.
    const [waiting] = await submit(store, 1, "emails");
    await submit(store, 1, "billing");
    const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
    await store.complete(lease.job.id, lease.leaseToken, null);
    const lastPruned = (await store.eventBounds()).latest;
    clock.advance(3_600_000);
    await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 10 });
    expect((await store.listEvents({ afterSequence: 0, limit: 10 })).map((e) => e.sequence)).toEqual([waiting]);

    // Replaying from before the hole would skip the pruned events silently: refused.
    for (const after of [0, waiting, lastPruned - 1]) {
      const err = await feedError(watch(feed, { afterSequence: after }).next());
      expect(err.reason).toBe("REPLAY_TOO_OLD");
      expect(err.message).toContain(`oldest available sequence is ${lastPruned + 1}`);
    }
    // From the last pruned event on, the history is unbroken.
    const w = watch(feed, { afterSequence: lastPruned });
    expect(await w.next()).toBeNull();
    const [next] = await submit(store);
    expect((await w.event()).sequence).toBe(next);
  });

  it("fail with REPLAY_TOO_OLD when a prune commits while the replay reads", async () => {
    const { store, feed, clock } = setup({ pageSize: 2 });
    await submit(store, 6, "billing");
    const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 6 });
    for (const l of leases) await store.complete(l.job.id, l.leaseToken, null);
    clock.advance(3_600_000);
    const w = watch(feed, { afterSequence: 0 });
    expect(await w.next()).toBeNull();
    expect(await w.next()).not.toBeNull(); // the first page is on its way
    await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 10 });
    const err = await feedError(
      (async () => {
        for (;;) await w.next();
      })(),
    );
    expect(err.reason).toBe("REPLAY_TOO_OLD");
  });

  it("fail with SEQUENCE_NOT_ISSUED when the resume point is beyond every sequence this database issued", async () => {
    const { store, feed } = setup();
    const stored = await submit(store, 2);
    const err = await feedError(watch(feed, { afterSequence: stored[1] + 1 }).next());
    expect(err.reason).toBe("SEQUENCE_NOT_ISSUED");
    expect(err.message).toContain(`(${stored[1]})`);
  });
});

describe("heartbeats the store does not keep", () => {
  it("reach neither a live watch nor a replay, so both carry the same events with the same sequences", async () => {
    const { store, feed, clock } = setup();
    const start = (await store.eventBounds()).latest;
    const live = watch(feed);
    expect(await live.next()).toBeNull();
    const [job] = await store.submit([newJob()]);
    const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
    for (let i = 0; i < 12; i++) {
      clock.advance(10_000);
      await store.heartbeat(job.job.id, lease.leaseToken);
    }
    await store.complete(job.job.id, lease.leaseToken, null);
    const stored = await store.listJobEvents(job.job.id);
    // submitted, claimed, the heartbeats at 10 s and 70 s, completed.
    expect(stored.map((e) => e.kind)).toEqual(["submitted", "claimed", "heartbeat", "heartbeat", "completed"]);

    const seenLive: JobEvent[] = [];
    while (seenLive.length < stored.length) seenLive.push(await live.event());
    const replay = watch(feed, { afterSequence: start });
    expect(await replay.next()).toBeNull();
    const replayed: JobEvent[] = [];
    while (replayed.length < stored.length) replayed.push(await replay.event());
    expect(seenLive).toEqual(stored);
    expect(replayed).toEqual(stored);
  });
});

describe("filters", () => {
  it("by queue, by job and by both, in the replay and live", async () => {
    const { store, feed } = setup();
    const [a] = await store.submit([newJob({ queue: "billing" })]);
    const [b] = await store.submit([newJob({ queue: "email" })]);
    const byQueue = watch(feed, { queue: "email", afterSequence: 0 });
    const byJob = watch(feed, { jobId: a.job.id, afterSequence: 0 });
    const byJobWrongQueue = watch(feed, { jobId: a.job.id, queue: "email", afterSequence: 0 });
    const all = watch(feed, { afterSequence: 0 });
    for (const w of [byQueue, byJob, byJobWrongQueue, all]) expect(await w.next()).toBeNull();

    expect(await byQueue.event()).toMatchObject({ jobId: b.job.id, kind: "submitted" });
    expect(await byJob.event()).toMatchObject({ jobId: a.job.id, kind: "submitted" });

    // Live: a claim and a cancel on each queue.
    await claimLeases(store, { queue: "billing", workerId: "w1", leaseDurationMs: 60_000, maxJobs: 1 });
    await store.cancel(b.job.id, "not needed");
    const [c] = await store.submit([newJob({ queue: "email" })]);

    expect(await byQueue.event()).toMatchObject({ jobId: b.job.id, kind: "cancelled" });
    expect(await byQueue.event()).toMatchObject({ jobId: c.job.id, kind: "submitted" });
    expect(await byJob.event()).toMatchObject({ jobId: a.job.id, kind: "claimed" });
    const everything: string[] = [];
    for (let i = 0; i < 5; i++) everything.push((await all.event()).kind);
    expect(everything).toEqual(["submitted", "submitted", "claimed", "cancelled", "submitted"]);

    // The job does not belong to "email": that watch only ever sees keepalives.
    expect(feed.stats.eventsSent).toBe(3 + 2 + 5);
    byJobWrongQueue.abort.abort();
    expect((await byJobWrongQueue.it.next()).done).toBe(true);
  });
});

describe("a slow subscriber", () => {
  it("is dropped when a commit finds more than bufferLimit events waiting for it, with the sequence to resume from", async () => {
    const { store, feed } = setup({ bufferLimit: 5 });
    const w = watch(feed);
    expect(await w.next()).toBeNull();
    const first = await submit(store, 2);
    expect((await w.event()).sequence).toBe(first[0]);

    // Five waiting (the bound), then a commit that finds five: still fine.
    await submit(store, 4);
    await submit(store, 1);
    expect(feed.stats.dropped.buffer_full).toBe(0);
    // A commit that finds six waiting drops it, at the commit, not when the client reads.
    await submit(store, 1);
    expect(feed.stats.dropped.buffer_full).toBe(1);
    expect(feed.stats.subscribers).toBe(0);

    const err = await feedError(w.next());
    expect(err.reason).toBe("SUBSCRIBER_TOO_SLOW");
    expect(err.message).toContain(`resume with after_sequence=${first[0]}`);

    // Resuming from there misses nothing.
    const again = watch(feed, { afterSequence: first[0] });
    expect(await again.next()).toBeNull();
    expect((await again.event()).sequence).toBe(first[1]);
  });

  it("that never received an event is told to resume from where its watch started", async () => {
    const { store, feed } = setup({ bufferLimit: 2 });
    const [start] = await submit(store);
    const w = watch(feed);
    expect(await w.next()).toBeNull();
    await submit(store, 3);
    await submit(store, 1);
    const err = await feedError(w.next());
    expect(err.message).toContain(`resume with after_sequence=${start}`);
  });

  it("is not dropped for one commit larger than the bound when it keeps up", async () => {
    const { store, feed } = setup({ bufferLimit: 3 });
    const w = watch(feed);
    await w.next();
    const big = await submit(store, 10);
    for (const seq of big) expect((await w.event()).sequence).toBe(seq);
    const [next] = await submit(store);
    expect((await w.event()).sequence).toBe(next);
    expect(feed.stats.dropped.buffer_full).toBe(0);
  });

  it("does not hold events for other subscribers", async () => {
    const { store, feed } = setup({ bufferLimit: 3 });
    const slow = watch(feed);
    const fast = watch(feed);
    await slow.next();
    await fast.next();
    const got: number[] = [];
    for (let i = 0; i < 6; i++) {
      const [seq] = await submit(store);
      got.push((await fast.event()).sequence);
      expect(got.at(-1)).toBe(seq);
    }
    expect(feed.stats).toMatchObject({ subscribers: 1, dropped: { buffer_full: 1 } });
    expect((await feedError(slow.next())).reason).toBe("SUBSCRIBER_TOO_SLOW");
  });
});

describe("keepalives and ending", () => {
  it("sends a keepalive every keepaliveMs while nothing happens", async () => {
    const { feed } = setup({ keepaliveMs: 20 });
    const w = watch(feed);
    const started = performance.now();
    expect(await w.next()).toBeNull();
    expect(await w.next()).toBeNull();
    expect(await w.next()).toBeNull();
    expect(performance.now() - started).toBeGreaterThanOrEqual(30);
  });

  it("ends quietly when the signal aborts, and unregisters", async () => {
    const { feed } = setup();
    const w = watch(feed);
    await w.next();
    const pending = w.it.next();
    expect(feed.stats.subscribers).toBe(1);
    w.abort.abort();
    expect((await pending).done).toBe(true);
    expect(feed.stats.subscribers).toBe(0);
  });

  it("unregisters when the consumer stops iterating", async () => {
    const { feed } = setup();
    const w = watch(feed);
    await w.next();
    await w.it.return();
    expect(feed.stats.subscribers).toBe(0);
  });

  it("ends every watch when the feed closes", async () => {
    const { feed } = setup();
    const w = watch(feed, { afterSequence: 0 });
    await w.next();
    const pending = w.it.next();
    feed.close();
    expect((await pending).done).toBe(true);
    expect(feed.stats.subscribers).toBe(0);
  });
});

describe("fan-out", () => {
  it("serves hundreds of subscribers from one store subscription, each with exactly its events", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-feed-"));
    const store = openSqliteStore({ path: join(dir, "jobs.db"), clock: new ManualClock(), synchronous: "normal" });
    const spy = vi.spyOn(store, "onCommitted");
    const feed = new EventFeed(store);
    cleanups.push(async () => {
      feed.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });
    expect(spy).toHaveBeenCalledTimes(1);

    const queues = ["q0", "q1", "q2", "q3"];
    const [target] = await store.submit([newJob({ queue: "q1" })]);
    const watchers = Array.from({ length: 300 }, (_, i) => {
      const spec: WatchSpec = i % 3 === 0 ? {} : i % 3 === 1 ? { queue: queues[i % 4] } : { jobId: target.job.id };
      return { spec, w: watch(feed, spec) };
    });
    for (const { w } of watchers) expect(await w.next()).toBeNull();
    expect(feed.stats.subscribers).toBe(300);

    await store.submit(queues.map((queue) => newJob({ queue })));
    await store.cancel(target.job.id, "done");
    const committed = await store.listEvents({ afterSequence: 1, limit: 100 });
    expect(committed).toHaveLength(5);

    for (const { spec, w } of watchers) {
      const mine = committed.filter(
        (e) => (spec.queue === undefined || e.queue === spec.queue) && (spec.jobId === undefined || e.jobId === spec.jobId),
      );
      for (const e of mine) expect(await w.event()).toEqual(e);
    }
    expect(spy).toHaveBeenCalledTimes(1);
  });
});

describe("the bytes waiting in a subscriber's connection", () => {
  it("drop a live subscriber at the next commit once they pass maxPendingBytes, with the sequence to resume from", async () => {
    const { store, feed } = setup({ maxPendingBytes: 1000 });
    let unread = 0;
    const abort = new AbortController();
    const it = feed.watchBatches({}, abort.signal, { output: { pendingOutputBytes: () => unread } });
    cleanups.push(async () => {
      abort.abort();
      await it.return();
    });
    expect((await it.next()).value).toBeNull();
    const first = await submit(store, 3);
    expect(((await it.next()).value as JobEvent[]).map((e) => e.sequence)).toEqual(first);

    unread = 1000; // at the bound: still fine
    const second = await submit(store, 2);
    expect(feed.stats.dropped.output_full).toBe(0);
    expect(((await it.next()).value as JobEvent[]).map((e) => e.sequence)).toEqual(second);
    unread = 1001;
    await submit(store);
    expect(feed.stats).toMatchObject({ subscribers: 0, dropped: { output_full: 1, buffer_full: 0 } });
    const err = await feedError(it.next());
    expect(err.reason).toBe("SUBSCRIBER_TOO_SLOW");
    expect(err.message).toContain(`more than 1000 bytes unread`);
    expect(err.message).toContain(`resume with after_sequence=${second.at(-1)}`);
    expect(err.metadata).toEqual({ reason: "output_full", afterSequence: String(second.at(-1)) });
  });

  it("do not drop a subscriber that is still replaying", async () => {
    const { store, feed } = setup({ maxPendingBytes: 10, pageSize: 2 });
    const stored = await submit(store, 5);
    const abort = new AbortController();
    const it = feed.watchBatches({ afterSequence: 0 }, abort.signal, { output: { pendingOutputBytes: () => 1_000_000 } });
    cleanups.push(async () => {
      abort.abort();
      await it.return();
    });
    expect((await it.next()).value).toBeNull();
    const seen: number[] = [];
    let midReplay: number[] = [];
    while (seen.length < stored.length + 1) {
      const batch = (await it.next()).value as JobEvent[];
      if (seen.length === 0) midReplay = await submit(store); // lands mid-replay
      seen.push(...batch.map((e) => e.sequence));
    }
    expect(seen).toEqual([...stored, ...midReplay]);
    expect(feed.stats.dropped.output_full).toBe(0);
  });
});

describe("a replay beside everything else the server does", () => {
  it("reads its next page only once the transport has passed on what it was given", async () => {
    const { store, feed } = setup({ pageSize: 2 });
    await submit(store, 6);
    const reads = vi.spyOn(store, "listEvents");
    let release: (() => void) | undefined;
    // Each time the feed asks whether the transport passed its output on: a promise per ask.
    const asks: Array<() => void> = [];
    const asked = [1, 2].map(() => new Promise<void>((resolve) => asks.push(resolve)));
    const output = {
      pendingOutputBytes: () => 0,
      // Holds on to what it got until the test lets it go, as a client that does not read.
      whenDrained: () => {
        asks.shift()?.();
        return new Promise<void>((resolve) => (release = resolve));
      },
    };
    const abort = new AbortController();
    const it = feed.watchBatches({ afterSequence: 0 }, abort.signal, { output });
    cleanups.push(async () => {
      abort.abort();
      await it.return();
    });
    expect((await it.next()).value).toBeNull();
    const first = it.next();
    await asked[0];
    expect(reads).not.toHaveBeenCalled();
    release!();
    expect(((await first).value as JobEvent[]).map((e) => e.sequence)).toEqual([1, 2]);
    const second = it.next();
    await asked[1];
    expect(reads).toHaveBeenCalledTimes(1);
    release!();
    expect(((await second).value as JobEvent[]).map((e) => e.sequence)).toEqual([3, 4]);
    expect(reads).toHaveBeenCalledTimes(2);
  });

  it("lets the calls that arrived meanwhile run between two pages", async () => {
    const { store, feed } = setup({ pageSize: 10 });
    await submit(store, 100);
    const log: string[] = [];
    const read = store.listEvents.bind(store);
    vi.spyOn(store, "listEvents").mockImplementation((spec) => {
      log.push("page");
      return read(spec);
    });
    // Another caller's work, queued as I/O callbacks are, one after another.
    let others = true;
    const other = () => {
      log.push("other");
      if (others) setImmediate(other);
    };
    setImmediate(other);
    const abort = new AbortController();
    let events = 0;
    for await (const batch of feed.watchBatches({ afterSequence: 0 }, abort.signal)) {
      if (batch !== null) events += batch.length;
      if (events === 100) break;
    }
    others = false;
    const pages = log.filter((l) => l === "page").length;
    expect(pages).toBeGreaterThanOrEqual(10);
    // Never two pages in a row: the other work ran between every two.
    expect(log.join(",")).not.toContain("page,page");
  });
});

describe("batches", () => {
  it("hand out everything a subscriber has waiting in one item, at most maxBatch, in order", async () => {
    const { store, feed } = setup({ maxBatch: 4 });
    const abort = new AbortController();
    const it = feed.watchBatches({}, abort.signal);
    cleanups.push(async () => {
      abort.abort();
      await it.return();
    });
    expect((await it.next()).value).toBeNull();
    const a = await submit(store, 3);
    const b = await submit(store, 3);
    const batches: number[][] = [];
    while (batches.flat().length < 6) batches.push(((await it.next()).value as JobEvent[]).map((e) => e.sequence));
    expect(batches.flat()).toEqual([...a, ...b]);
    expect(batches.every((x) => x.length >= 1 && x.length <= 4)).toBe(true);
    expect(batches.length).toBeLessThan(6);
    expect(feed.stats.eventsSent).toBe(6);
  });
});

describe("the subscriber limit", () => {
  it("refuses one watch more than maxSubscribers with TOO_MANY_SUBSCRIBERS, and admits one again when a watch ends", async () => {
    const { feed } = setup({ maxSubscribers: 2 });
    const a = watch(feed);
    const b = watch(feed, { queue: "billing" });
    expect(await a.next()).toBeNull();
    expect(await b.next()).toBeNull();
    const c = watch(feed, { jobId: "01a22c92-89b6-73dc-8350-272757f322bb" });
    const err = await feedError(c.next());
    expect(err.reason).toBe("TOO_MANY_SUBSCRIBERS");
    expect(err.message).toMatch(/already serves 2 WatchEvents streams.*LEASEQUEUE_MAX_WATCHERS/);
    expect(feed.stats.subscribers).toBe(2);
    await a.it.return();
    const d = watch(feed);
    expect(await d.next()).toBeNull();
    expect(feed.stats.subscribers).toBe(2);
  });
});
