/**
 * The clock of a store whose database keeps the time (PostgreSQL): every
 * time the store writes or compares, and every timer of the server's loops,
 * follows the database's clock, so servers whose host clocks disagree still
 * agree on who owns a lease, when a delayed job is due, where a rate window
 * ends and when a schedule runs (docs/postgresql.md "Which clock decides").
 */
import type { Clock, HostClock } from "../../domain/clock.js";

export interface DatabaseClockOptions {
  /** The host's wall and monotonic clocks. */
  host: HostClock;
  /**
   * Reads the database's time (ms since the epoch) in one round trip,
   * calling `sent` right before the query goes out: any wait before it (for
   * a connection) is not part of the round trip.
   */
  readDatabaseTime(sent: () => void): Promise<number>;
  /** How often the distance is measured again. Default 10,000 ms. */
  intervalMs?: number;
  /** The longest round trip a reading may take to be trusted. Default 1,000 ms. */
  maxRoundTripMs?: number;
  /** A reading failed or was not trusted; the clock keeps its last distance (`offsetMs`, database minus host). */
  onUnmeasured?(reason: string, offsetMs: number): void;
}

export const DATABASE_CLOCK_INTERVAL_MS = 10_000;
export const DATABASE_CLOCK_MAX_ROUND_TRIP_MS = 1_000;

/**
 * How: the host's time is read against the database's now and then (the
 * midpoint of a round trip, as NTP does). Between two readings the clock
 * moves with the host's monotonic clock, so a step of the host's wall clock
 * (NTP, an operator, a VM resumed) changes nothing until the next reading,
 * which measures the new distance without a jump in the database's time.
 * A reading moves the clock by the measurement's error (milliseconds on a
 * network), forward or back; when the database's own clock is set, the
 * store follows it, as every other server on that database does.
 *
 * A reading whose round trip is longer than `maxRoundTripMs` is not
 * trusted (its midpoint could be off by half of it): the clock keeps what it
 * had and says so through `onUnmeasured`, as it does when the database
 * cannot be reached.
 */
export class DatabaseClock implements Clock {
  readonly #host: HostClock;
  readonly #options: DatabaseClockOptions;
  /** The database's time at the last trusted reading, and the host's monotonic reading then. */
  #databaseAt: number;
  #monotonicAt: number;
  /** Database minus host wall clock at the last trusted reading. */
  #offsetMs = 0;
  #measured = false;
  #timer: NodeJS.Timeout | undefined;
  #measuring: Promise<boolean> | undefined;

  constructor(options: DatabaseClockOptions) {
    this.#options = options;
    this.#host = options.host;
    // Until the first trusted reading, the host's own time.
    this.#databaseAt = this.#host.now();
    this.#monotonicAt = this.#host.monotonic();
  }

  /** The database's time now, in whole milliseconds. */
  now(): number {
    return Math.floor(this.#databaseAt + (this.#host.monotonic() - this.#monotonicAt));
  }

  /** Database minus host wall clock, in ms, as last measured (0 before any trusted reading). */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  /** Whether a reading has been trusted yet. */
  get measured(): boolean {
    return this.#measured;
  }

  /** Reads the database's time once; resolves whether the reading was trusted. Concurrent calls share one reading. */
  measure(): Promise<boolean> {
    this.#measuring ??= this.#read().finally(() => (this.#measuring = undefined));
    return this.#measuring;
  }

  async #read(): Promise<boolean> {
    const host = this.#host;
    let wall0 = host.now();
    let mono0 = host.monotonic();
    const sent = () => {
      wall0 = host.now();
      mono0 = host.monotonic();
    };
    let databaseTime: number;
    try {
      databaseTime = await this.#options.readDatabaseTime(sent);
    } catch (err) {
      this.#unmeasured(`the database's time could not be read: ${(err as Error).message}`);
      return false;
    }
    const mono1 = host.monotonic();
    const wall1 = host.now();
    const roundTrip = mono1 - mono0;
    const limit = this.#options.maxRoundTripMs ?? DATABASE_CLOCK_MAX_ROUND_TRIP_MS;
    if (!Number.isFinite(databaseTime)) {
      this.#unmeasured(`the database answered no time (${String(databaseTime)})`);
      return false;
    }
    if (roundTrip > limit) {
      this.#unmeasured(`the round trip took ${Math.round(roundTrip)} ms (more than ${limit} ms)`);
      return false;
    }
    this.#databaseAt = databaseTime;
    this.#monotonicAt = (mono0 + mono1) / 2;
    this.#offsetMs = databaseTime - (wall0 + wall1) / 2;
    this.#measured = true;
    return true;
  }

  #unmeasured(reason: string): void {
    this.#options.onUnmeasured?.(reason, this.#offsetMs);
  }

  /** Measures again every `intervalMs` until stop(). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.measure(), this.#options.intervalMs ?? DATABASE_CLOCK_INTERVAL_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

export interface ClockJumpWatchOptions {
  host: HostClock;
  /** Told the size of a jump (wall minus monotonic movement, ms; negative: the wall clock went back). */
  onJump(jumpMs: number): void;
  /** How often the two clocks are compared. Default 1,000 ms. */
  intervalMs?: number;
  /** The smallest disagreement reported. Default 1,000 ms. */
  thresholdMs?: number;
}

/**
 * Watches the host's wall clock against its monotonic clock and reports a
 * jump (NTP stepping, an operator setting the time): on a store whose only
 * clock is the host's (SQLite), such a jump moves lease expiry, delays and
 * schedules with it. Returns a function that stops the watch.
 */
export function watchClockJumps(options: ClockJumpWatchOptions): () => void {
  const threshold = options.thresholdMs ?? 1000;
  let wall = options.host.now();
  let mono = options.host.monotonic();
  const check = () => {
    const nextWall = options.host.now();
    const nextMono = options.host.monotonic();
    const jump = nextWall - wall - (nextMono - mono);
    wall = nextWall;
    mono = nextMono;
    if (Math.abs(jump) > threshold) options.onJump(Math.round(jump));
  };
  const timer = setInterval(check, options.intervalMs ?? 1000);
  timer.unref();
  return () => clearInterval(timer);
}
