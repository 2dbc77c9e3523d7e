/**
 * The LISTEN connection of a server (store/postgres/notifications.ts):
 * notifications reach the callback, the connection comes back by itself
 * after PostgreSQL ends it, and the owner is asked to catch up once LISTEN
 * is in place again.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  decodeNotification,
  encodeNotification,
  NotificationListener,
  type CatchUpReason,
  type StoreNotification,
} from "../../../src/store/postgres/notifications.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();

/** Resolves with the first value pushed after it was asked for that satisfies `test`. */
class Inbox<T> {
  readonly items: T[] = [];
  #waiters: Array<{ test: (v: T) => boolean; resolve: (v: T) => void }> = [];
  push = (v: T): void => {
    this.items.push(v);
    for (const w of this.#waiters.filter((w) => w.test(v))) {
      this.#waiters.splice(this.#waiters.indexOf(w), 1);
      w.resolve(v);
    }
  };
  next(test: (v: T) => boolean = () => true): Promise<T> {
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }
}

describe("notification payloads", () => {
  it("round-trip, and a payload of an unknown kind or shape is ignored", () => {
    const all: StoreNotification[] = [
      { kind: "events", through: 42 },
      { kind: "submitted", queue: "billing" },
      { kind: "queue_control", queue: "billing", paused: true },
    ];
    for (const n of all) expect(decodeNotification(encodeNotification(n))).toEqual(n);
    // What the SQL functions send (json_build_object spaces its output).
    expect(decodeNotification('{"kind" : "events", "through" : 7}')).toEqual({ kind: "events", through: 7 });
    for (const bad of [
      "",
      "not json",
      "[]",
      "null",
      '{"kind":"events"}',
      '{"kind":"events","through":"7"}',
      '{"kind":"later"}',
      '{"kind":"queue_control","queue":"q"}',
    ]) {
      expect(decodeNotification(bad), bad).toBeUndefined();
    }
  });
});

describe.skipIf(skipWithoutPostgres(probe))("the LISTEN connection", () => {
  const db = useTestSchema(probe, "notify");
  const channel = db.schema;
  const listeners: NotificationListener[] = [];
  afterEach(async () => {
    for (const l of listeners.splice(0)) await l.close();
  });

  function listen(options: { catchUpIntervalMs?: number } = {}) {
    const notifications = new Inbox<StoreNotification>();
    const catchUps = new Inbox<CatchUpReason>();
    const errors = new Inbox<Error>();
    const listener = new NotificationListener({
      client: { connectionString: db.url },
      channel,
      onNotification: notifications.push,
      onCatchUp: catchUps.push,
      onConnectionError: errors.push,
      initialBackoffMs: 20,
      maxBackoffMs: 200,
      catchUpIntervalMs: options.catchUpIntervalMs ?? 60_000,
    });
    listeners.push(listener);
    return { listener, notifications, catchUps, errors };
  }

  const notify = (n: StoreNotification) => db.pool.query("SELECT pg_notify($1, $2)", [channel, encodeNotification(n)]);

  it("delivers a notification committed on the schema's channel, and asks for a catch-up once listening", async () => {
    const { listener, notifications, catchUps } = listen();
    const connected = catchUps.next((r) => r === "connected");
    listener.start();
    await listener.whenListening();
    await connected;
    const arrived = notifications.next();
    await notify({ kind: "submitted", queue: "billing" });
    expect(await arrived).toEqual({ kind: "submitted", queue: "billing" });
    // Another channel (another schema) is not heard.
    await db.pool.query("SELECT pg_notify($1, $2)", [`${channel}_other`, encodeNotification({ kind: "events", through: 1 })]);
    const next = notifications.next();
    await notify({ kind: "events", through: 9 });
    expect(await next).toEqual({ kind: "events", through: 9 });
    expect(notifications.items).toHaveLength(2);
  });

  it("reconnects after PostgreSQL terminates the listening connection, catches up, and hears what comes next", async () => {
    const { listener, notifications, catchUps, errors } = listen();
    listener.start();
    await listener.whenListening();
    const pid = listener.backendPid!;
    expect(pid).toBeGreaterThan(0);
    const lost = errors.next();
    const reconnected = catchUps.next((r) => r === "connected");
    await db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
    expect((await lost).message).toMatch(/terminat|ended|closed|Connection/i);
    await reconnected;
    expect(listener.connections).toBe(2);
    expect(listener.backendPid).not.toBe(pid);
    const arrived = notifications.next();
    await notify({ kind: "queue_control", queue: "reports", paused: false });
    expect(await arrived).toEqual({ kind: "queue_control", queue: "reports", paused: false });
  });

  it("keeps retrying while the connection cannot be made, and connects when it can", async () => {
    // A listener whose connections are refused at first: pointed at the test database with a user that does not exist yet.
    const role = `${db.schema}_late`;
    const notifications = new Inbox<StoreNotification>();
    const errors = new Inbox<Error>();
    const url = new URL(db.url);
    url.username = role;
    const listener = new NotificationListener({
      client: { connectionString: url.toString() },
      channel,
      onNotification: notifications.push,
      onConnectionError: errors.push,
      initialBackoffMs: 20,
      maxBackoffMs: 100,
      catchUpIntervalMs: 60_000,
    });
    listeners.push(listener);
    listener.start();
    await errors.next();
    await errors.next();
    expect(listener.listening).toBe(false);
    await db.pool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      await listener.whenListening();
      const arrived = notifications.next();
      await notify({ kind: "events", through: 3 });
      expect(await arrived).toEqual({ kind: "events", through: 3 });
    } finally {
      await listener.close();
      await db.pool.query(`DROP ROLE ${role}`);
    }
  });

  it("asks for a catch-up every interval, checking the connection each time", async () => {
    const { listener, catchUps } = listen({ catchUpIntervalMs: 30 });
    listener.start();
    await listener.whenListening();
    await catchUps.next((r) => r === "interval");
    await catchUps.next((r) => r === "interval");
    expect(listener.listening).toBe(true);
  });

  it("stops for good when closed: no reconnect, no more callbacks", async () => {
    const { listener, catchUps, errors } = listen({ catchUpIntervalMs: 20 });
    listener.start();
    await listener.whenListening();
    await listener.close();
    expect(listener.backendPid).toBeUndefined();
    const count = catchUps.items.length;
    // A witness started after the close, on the same interval: Node runs timers of one duration in the order they
    // were set, so by its fifth interval catch-up a timer the closed listener left running would have fired five times.
    const witness = listen({ catchUpIntervalMs: 20 });
    witness.listener.start();
    for (let i = 0; i < 5; i++) await witness.catchUps.next((r) => r === "interval");
    expect(catchUps.items.length).toBe(count);
    expect(errors.items).toHaveLength(0);
    expect(listener.listening).toBe(false);
  });
});
