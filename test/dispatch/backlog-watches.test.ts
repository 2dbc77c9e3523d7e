/**
 * BacklogWatches: a watch of a queue wakes for a committed state change or a
 * queue control of that queue (never for another queue, nor for a heartbeat
 * that changes no count), when the next waiting job's time comes, at most
 * once per interval however many commits arrive, and never misses a change
 * announced while its stream was reading. Timers are faked: no test waits
 * for real time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import type { JobEvent, JobState } from "../../src/domain/job.js";
import { BacklogWatches, DEFAULT_BACKLOG_MIN_INTERVAL_MS } from "../../src/dispatch/backlog-watches.js";
import type { CommitListener, CommittedChange, Store } from "../../src/store/store.js";

/** A store that only announces what the test tells it to. */
function announcingStore() {
  const listeners = new Set<CommitListener>();
  const store = {
    onCommitted(listener: CommitListener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  } as unknown as Store;
  const announce = (change: Partial<CommittedChange>) => {
    for (const l of listeners) l({ events: [], unrecorded: [], queueControls: [], external: false, ...change });
  };
  return { store, announce, listeners };
}

function event(queue: string, fromState: JobState | null, toState: JobState): JobEvent {
  return {
    sequence: 1,
    jobId: "01a22c92-89b6-73dc-8350-272757f322bb",
    queue,
    groupKey: "",
    kind: fromState === null ? "submitted" : "heartbeat",
    fromState,
    toState,
    eventTime: 0,
    workerId: null,
    attempt: 0,
    message: null,
  };
}

/** Whether `promise` has settled once the timers due now have run. */
async function settledNow(promise: Promise<boolean>): Promise<boolean | "pending"> {
  let outcome: boolean | "pending" = "pending";
  void promise.then((v) => (outcome = v));
  await vi.advanceTimersByTimeAsync(0);
  return outcome;
}

describe("BacklogWatches", () => {
  const clock = new ManualClock(Date.parse("2026-12-01T10:00:00Z"));
  let signal: AbortController;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    signal = new AbortController();
  });
  afterEach(() => {
    signal.abort();
    vi.useRealTimers();
  });

  it("wakes for a state change of its queue, not for another queue's or for a heartbeat", async () => {
    const { store, announce } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const watch = watches.watch("billing");
    const next = watch.next(null, signal.signal);
    announce({ events: [event("emails", null, "queued")] });
    announce({ events: [event("billing", "running", "running")] });
    expect(await settledNow(next)).toBe("pending");
    announce({ events: [event("billing", null, "queued")] });
    expect(await settledNow(next)).toBe(true);
    watches.close();
  });

  it("wakes for a pause or a resume of its queue", async () => {
    const { store, announce } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const watch = watches.watch("billing");
    const next = watch.next(null, signal.signal);
    announce({ queueControls: [{ queue: "billing", paused: true }] });
    expect(await settledNow(next)).toBe(true);
    watches.close();
  });

  it("returns at once for a change announced before the wait began (while the stream read)", async () => {
    const { store, announce } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const watch = watches.watch("billing");
    announce({ events: [event("billing", "queued", "running")] });
    expect(await settledNow(watch.next(null, signal.signal))).toBe(true);
    // That change is spent: the next wait waits for a new one.
    expect(await settledNow(watch.next(null, signal.signal))).toBe("pending");
    watches.close();
  });

  it("wakes when the next waiting job's time comes, with no commit", async () => {
    const { store } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const next = watches.watch("billing").next(clock.now() + 30_000, signal.signal);
    await vi.advanceTimersByTimeAsync(29_999);
    expect(await settledNow(next)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await next).toBe(true);
    watches.close();
  });

  it("wakes at most once per interval however many commits arrive", async () => {
    const { store, announce } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const watch = watches.watch("billing");
    const first = watch.next(null, signal.signal);
    announce({ events: [event("billing", null, "queued")] });
    expect(await settledNow(first)).toBe(true);
    const second = watch.next(null, signal.signal);
    for (let i = 0; i < 1000; i++) announce({ events: [event("billing", "queued", "running")] });
    await vi.advanceTimersByTimeAsync(DEFAULT_BACKLOG_MIN_INTERVAL_MS - 1);
    expect(await settledNow(second)).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(await second).toBe(true);
    watches.close();
  });

  it("answers false when the caller goes away or the watches close, and forgets closed watches", async () => {
    const { store, announce, listeners } = announcingStore();
    const watches = new BacklogWatches(store, clock);
    const left = watches.watch("billing");
    const leaving = left.next(null, signal.signal);
    signal.abort();
    expect(await leaving).toBe(false);
    left.close();
    expect(watches.watching).toBe(0);

    const open = watches.watch("billing");
    const waiting = open.next(null, new AbortController().signal);
    watches.close();
    expect(await waiting).toBe(false);
    expect(watches.watching).toBe(0);
    expect(listeners.size).toBe(0);
    announce({ events: [event("billing", null, "queued")] });
    expect(await open.next(null, new AbortController().signal)).toBe(false);
  });
});
