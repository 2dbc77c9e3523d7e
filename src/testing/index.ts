/**
 * For tests, benchmarks and simulations, not for the server: a clock that
 * moves only when told to, and a logger that drops everything. Built into
 * dist/ for the benchmarks, and left out of the npm package (package.json
 * "files").
 */
import type { HostClock } from "../domain/clock.js";
import { createLogger, type Logger } from "../logger.js";

/** A clock that only moves when told to; for tests and simulations. Its monotonic reading is its time. */
export class ManualClock implements HostClock {
  #now: number;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  monotonic(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}

/** Drops every log line. */
export const silentLogger: Logger = createLogger({ write: () => {} });
