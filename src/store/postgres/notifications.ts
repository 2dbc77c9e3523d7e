/**
 * Cross-server wake-ups (docs/postgresql.md "Notifications between servers"):
 * what one server, or an application's `submit()`, commits is announced with
 * NOTIFY on the schema's channel, and every server keeps one connection that
 * LISTENs.
 */
import pg from "pg";
import { jitteredBackoffMs } from "../../domain/backoff.js";
import type { QueueConfig } from "../../domain/queue-limits.js";
import { quoteIdentifier } from "./identifiers.js";

/**
 * Payloads (JSON, well under NOTIFY's 8000 bytes):
 * - `{"kind":"events","through":N}`: the sequencer (event-sequencer.ts)
 *   numbered events up to sequence N; read those after the last one seen.
 * - `{"kind":"submitted","queue":Q}`: `<schema>.submit()` committed jobs of
 *   queue Q whose events are not numbered yet: wake Q's claimers, and run
 *   the sequencer.
 * - `{"kind":"queue_control","queue":Q,"paused":B,"config":C,"origin":O}`: Q
 *   was paused, resumed or given the limits C (`{"maxRunning":..,
 *   "rateLimit":..,"ratePeriodMs":..}`, present only when they changed) by
 *   store instance O (not an event, so nothing to read: wake or hold Q's
 *   claimers).
 * - `{"kind":"schedules","origin":O}`: store instance O created, replaced or
 *   deleted a schedule: schedulers set their timers again.
 * PostgreSQL folds identical notifications of one transaction into one, so
 * a transaction that submits many jobs to one queue sends one `submitted`.
 */
export type StoreNotification =
  | { kind: "events"; through: number }
  | { kind: "submitted"; queue: string }
  /** `origin`: the store instance that made the change, so it can tell its own from another server's. */
  | { kind: "queue_control"; queue: string; paused: boolean; config?: QueueConfig; origin?: string }
  | { kind: "schedules"; origin?: string };

/**
 * The channel of a schema: its name, so that schemas sharing a database
 * (tests, several installations) never hear each other. config.ts keeps
 * schema names at most 63 bytes, PostgreSQL's limit for a channel.
 */
export function notificationChannel(schema: string): string {
  return schema;
}

export function encodeNotification(n: StoreNotification): string {
  return JSON.stringify(n);
}

/** The notification a payload holds, or undefined for one this release does not know (a newer server's). */
export function decodeNotification(payload: string): StoreNotification | undefined {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if (o.kind === "events" && Number.isSafeInteger(o.through)) return { kind: "events", through: o.through as number };
  if (o.kind === "submitted" && typeof o.queue === "string") return { kind: "submitted", queue: o.queue };
  if (o.kind === "schedules") return { kind: "schedules", ...(typeof o.origin === "string" ? { origin: o.origin } : {}) };
  if (o.kind === "queue_control" && typeof o.queue === "string" && typeof o.paused === "boolean") {
    const config = queueConfigOf(o.config);
    return {
      kind: "queue_control",
      queue: o.queue,
      paused: o.paused,
      ...(config !== undefined ? { config } : {}),
      ...(typeof o.origin === "string" ? { origin: o.origin } : {}),
    };
  }
  return undefined;
}

function queueConfigOf(v: unknown): QueueConfig | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const c = v as Record<string, unknown>;
  // A server from before groups announces no group rules: none.
  const { groupMaxRunning = 0, groupRateLimit = 0, fair = false, ordered = false } = c;
  const counts = [c.maxRunning, c.rateLimit, c.ratePeriodMs, groupMaxRunning, groupRateLimit];
  if (!counts.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) return undefined;
  if (typeof fair !== "boolean" || typeof ordered !== "boolean") return undefined;
  return {
    maxRunning: c.maxRunning as number,
    rateLimit: c.rateLimit as number,
    ratePeriodMs: c.ratePeriodMs as number,
    groupMaxRunning: groupMaxRunning as number,
    groupRateLimit: groupRateLimit as number,
    fair,
    ordered,
  };
}

/** Sends a notification inside the caller's transaction (delivered at its commit). */
export const NOTIFY_SQL = "SELECT pg_notify($1, $2)";

/** Why the owner is asked to catch up: LISTEN was (re)established, or the periodic timer. */
export type CatchUpReason = "connected" | "interval";

export interface NotificationListenerOptions {
  /** The connection of the listener: a dedicated client, never one of the pool's. */
  client: pg.ClientConfig;
  channel: string;
  onNotification(notification: StoreNotification): void;
  /** Read the tables for what notifications may have missed. Default: nothing. */
  onCatchUp?(reason: CatchUpReason): void;
  /** The listening connection failed (it will reconnect): for the log. The error never holds the password. */
  onConnectionError?(error: Error, retryInMs: number): void;
  /** How often the owner catches up, and the connection is checked with a query. Default 1000 ms. */
  catchUpIntervalMs?: number;
  /** First reconnection delay; doubles per failed attempt up to maxBackoffMs. Default 100 ms. */
  initialBackoffMs?: number;
  /** Default 5000 ms. */
  maxBackoffMs?: number;
  /** How long the periodic check query may take before the connection counts as lost. Default 5000 ms. */
  checkTimeoutMs?: number;
}

/**
 * One LISTEN connection per server, reconnecting with exponential backoff
 * (jittered, reset by a successful connect) until closed.
 *
 * Notifications are hints, never the data: a receiver reads what changed
 * from the tables (events after the last sequence it saw, jobs of a queue).
 * So a lost notification (the listening connection dropped, the server was
 * busy reconnecting) costs latency, not correctness: after every
 * (re)connect, and every `catchUpIntervalMs`, the listener asks its owner to
 * catch up by reading the tables. A catch-up after a reconnect runs once
 * LISTEN is in place again, so whatever commits after it is notified and
 * whatever committed before it is read.
 */
export class NotificationListener {
  readonly #options: NotificationListenerOptions;
  readonly #catchUpIntervalMs: number;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #checkTimeoutMs: number;
  #client: pg.Client | undefined;
  /** Bumped by every connection attempt and every loss: callbacks of an older connection are ignored. */
  #generation = 0;
  #failures = 0;
  #closed = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #interval: NodeJS.Timeout | undefined;
  #backendPid: number | undefined;
  #connections = 0;
  #waiters: Array<() => void> = [];

  constructor(options: NotificationListenerOptions) {
    this.#options = options;
    this.#catchUpIntervalMs = options.catchUpIntervalMs ?? 1000;
    this.#initialBackoffMs = options.initialBackoffMs ?? 100;
    this.#maxBackoffMs = options.maxBackoffMs ?? 5000;
    this.#checkTimeoutMs = options.checkTimeoutMs ?? 5000;
  }

  /** Starts listening (in the background: see whenListening). */
  start(): void {
    if (this.#interval !== undefined || this.#closed) return;
    this.#interval = setInterval(() => void this.#tick(), this.#catchUpIntervalMs);
    this.#interval.unref();
    void this.#connect();
  }

  /** True while LISTEN is in place. */
  get listening(): boolean {
    return this.#client !== undefined;
  }

  /** The server process of the listening connection (for pg_terminate_backend in tests, and for logs). */
  get backendPid(): number | undefined {
    return this.#backendPid;
  }

  /** Successful connections so far (1 after the first, 2 after a reconnect, ...). */
  get connections(): number {
    return this.#connections;
  }

  /** Resolves once LISTEN is in place (at once when it is). */
  whenListening(): Promise<void> {
    if (this.listening) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#generation++;
    clearInterval(this.#interval);
    clearTimeout(this.#retryTimer);
    const client = this.#client;
    this.#client = undefined;
    this.#backendPid = undefined;
    if (client !== undefined) await client.end().catch(() => {});
  }

  async #connect(): Promise<void> {
    const generation = ++this.#generation;
    const client = new pg.Client({ keepAlive: true, application_name: "leasequeue-listener", ...this.#options.client });
    // Errors of a lost connection arrive as events; without a listener they would crash the process.
    client.on("error", (err) => this.#lost(generation, client, err));
    client.on("end", () => this.#lost(generation, client, new Error("the listening connection ended")));
    client.on("notification", (message) => {
      if (generation !== this.#generation || message.channel !== this.#options.channel || message.payload === undefined) return;
      const notification = decodeNotification(message.payload);
      if (notification === undefined) return;
      try {
        this.#options.onNotification(notification);
      } catch {
        // The owner's failure must not reach the driver's event emitter; the next catch-up covers what it missed.
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdentifier(this.#options.channel)}`);
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      if (generation !== this.#generation) {
        // Closed, or lost while connecting: this connection is not wanted.
        await client.end().catch(() => {});
        return;
      }
      this.#backendPid = rows[0].pid;
    } catch (err) {
      this.#lost(generation, client, err as Error);
      return;
    }
    this.#client = client;
    this.#failures = 0;
    this.#connections++;
    for (const resolve of this.#waiters.splice(0)) resolve();
    this.#catchUp("connected");
  }

  #lost(generation: number, client: pg.Client, err: Error): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    this.#client = undefined;
    this.#backendPid = undefined;
    client.end().catch(() => {});
    if (this.#closed) return;
    const delay = jitteredBackoffMs(this.#failures, { initialMs: this.#initialBackoffMs, maxMs: this.#maxBackoffMs });
    this.#failures++;
    this.#options.onConnectionError?.(err, delay);
    this.#retryTimer = setTimeout(() => void this.#connect(), delay);
    this.#retryTimer.unref();
  }

  /** Checks the connection (a connection that died silently ends here), then asks the owner to catch up. */
  async #tick(): Promise<void> {
    const client = this.#client;
    const generation = this.#generation;
    if (client !== undefined) {
      try {
        await client.query({ text: "SELECT 1", query_timeout: this.#checkTimeoutMs } as pg.QueryConfig);
      } catch (err) {
        this.#lost(generation, client, err as Error);
      }
    }
    if (!this.#closed) this.#catchUp("interval");
  }

  #catchUp(reason: CatchUpReason): void {
    try {
      this.#options.onCatchUp?.(reason);
    } catch {
      // The owner's failure to catch up must not stop the listener; the next interval tries again.
    }
  }
}
