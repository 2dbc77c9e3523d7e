/* eslint-disable @typescript-eslint/require-await -- readers stand in for a query: async without waiting on anything */
/**
 * The database-referenced clock (store/database/database-clock.ts) and the host
 * clock's jump watch, on clocks the tests move.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { type HostClock } from "../../src/domain/clock.js";
import { ManualClock } from "../../src/testing/index.js";
import { DatabaseClock, watchClockJumps } from "../../src/store/database/database-clock.js";

/** A host whose wall clock can be set apart from its monotonic clock (NTP stepping it). */
class SteppableHost implements HostClock {
  wall: number;
  mono = 0;
  constructor(wall: number) {
    this.wall = wall;
  }
  now() {
    return this.wall;
  }
  monotonic() {
    return this.mono;
  }
  /** Time passes: both clocks move. */
  pass(ms: number) {
    this.wall += ms;
    this.mono += ms;
  }
}

const T0 = Date.UTC(2026, 11, 1, 12);

describe("DatabaseClock", () => {
  it("follows the database's time from the midpoint of the round trip and reports database minus host", async () => {
    const host = new SteppableHost(T0);
    const database = new ManualClock(T0 + 30_000);
    const clock = new DatabaseClock({
      host,
      readDatabaseTime: async (sent) => {
        sent();
        host.pass(40); // the query's way out
        const t = database.now() + 40;
        host.pass(40); // and back
        return t;
      },
    });
    expect(await clock.measure()).toBe(true);
    // The reading was taken 40 ms after the query left: the midpoint of an 80 ms round trip.
    expect(clock.offsetMs).toBe(30_000);
    expect(clock.now()).toBe(host.now() + 30_000);
    host.pass(5_000);
    expect(clock.now()).toBe(host.now() + 30_000);
  });

  it("moves with the monotonic clock between readings, so a step of the host's wall clock changes nothing", async () => {
    const host = new SteppableHost(T0);
    const database = () => T0 + host.monotonic();
    const clock = new DatabaseClock({ host, readDatabaseTime: async () => database() });
    await clock.measure();
    host.pass(1_000);
    host.wall += 30_000; // NTP steps the wall clock forward
    expect(clock.now()).toBe(T0 + 1_000);
    // The next reading measures the new distance; the database's time does not jump.
    await clock.measure();
    expect(clock.offsetMs).toBe(-30_000);
    expect(clock.now()).toBe(T0 + 1_000);
  });

  it("follows the database when its clock is set back", async () => {
    const host = new SteppableHost(T0);
    let database = T0;
    const clock = new DatabaseClock({ host, readDatabaseTime: async () => database });
    await clock.measure();
    host.pass(100);
    expect(clock.now()).toBe(T0 + 100);
    database = T0 - 3_600_000 + 100;
    await clock.measure();
    expect(clock.now()).toBe(T0 - 3_600_000 + 100);
    expect(clock.offsetMs).toBe(-3_600_000);
  });

  it("does not trust a reading whose round trip exceeds the limit, keeping the last offset and saying so", async () => {
    const host = new SteppableHost(T0);
    let slow = false;
    const unmeasured: Array<[string, number]> = [];
    const clock = new DatabaseClock({
      host,
      maxRoundTripMs: 1000,
      readDatabaseTime: async (sent) => {
        sent();
        const t = host.now() + (slow ? 60_000 : 2_000);
        if (slow) host.pass(1_500);
        return t;
      },
      onUnmeasured: (reason, offsetMs) => unmeasured.push([reason, offsetMs]),
    });
    await clock.measure();
    expect(clock.offsetMs).toBe(2_000);
    slow = true;
    expect(await clock.measure()).toBe(false);
    expect(clock.offsetMs).toBe(2_000);
    expect(clock.now()).toBe(host.now() + 2_000);
    expect(unmeasured).toEqual([["the round trip took 1500 ms (more than 1000 ms)", 2_000]]);
  });

  it("keeps the last offset when the database cannot be reached", async () => {
    const host = new SteppableHost(T0);
    let down = false;
    const unmeasured: string[] = [];
    const clock = new DatabaseClock({
      host,
      readDatabaseTime: async () => {
        if (down) throw new Error("connect ECONNREFUSED 127.0.0.1:5432");
        return host.now() - 700;
      },
      onUnmeasured: (reason) => unmeasured.push(reason),
    });
    expect(clock.measured).toBe(false);
    await clock.measure();
    expect(clock.measured).toBe(true);
    down = true;
    expect(await clock.measure()).toBe(false);
    expect(clock.offsetMs).toBe(-700);
    expect(unmeasured).toEqual(["the database's time could not be read: connect ECONNREFUSED 127.0.0.1:5432"]);
  });

  it("measures again on its interval until stopped", async () => {
    vi.useFakeTimers();
    try {
      const host = new SteppableHost(T0);
      let readings = 0;
      const clock = new DatabaseClock({ host, intervalMs: 10_000, readDatabaseTime: async () => (readings++, host.now()) });
      clock.start();
      await vi.advanceTimersByTimeAsync(30_000);
      expect(readings).toBe(3);
      clock.stop();
      await vi.advanceTimersByTimeAsync(30_000);
      expect(readings).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("watchClockJumps", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reports a jump of the wall clock against the monotonic clock by more than the threshold, with its size and sign", async () => {
    vi.useFakeTimers();
    const host = new SteppableHost(T0);
    const jumps: number[] = [];
    const stop = watchClockJumps({ host, onJump: (ms) => jumps.push(ms), intervalMs: 1000, thresholdMs: 1000 });
    host.pass(1000);
    await vi.advanceTimersByTimeAsync(1000);
    host.pass(1000);
    host.wall += 900; // a slew within the threshold
    await vi.advanceTimersByTimeAsync(1000);
    host.pass(1000);
    host.wall += 45_000;
    await vi.advanceTimersByTimeAsync(1000);
    host.pass(1000);
    host.wall -= 3_000;
    await vi.advanceTimersByTimeAsync(1000);
    expect(jumps).toEqual([45_000, -3_000]);
    stop();
    host.wall += 60_000;
    await vi.advanceTimersByTimeAsync(5000);
    expect(jumps).toEqual([45_000, -3_000]);
  });
});
