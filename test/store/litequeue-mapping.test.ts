/**
 * litequeue rows -> jobs (store/import/litequeue-mapping.ts): each status, the
 * nanosecond times, the payload rules and the rows it refuses.
 */
import { describe, expect, it } from "vitest";
import { mapLitequeueRow, type LitequeueRow } from "../../src/store/import/litequeue-mapping.js";

const ID = "019ad5a2-7b3c-7def-8123-456789abcdef";
/** 2025-12-01T09:06:40.123999999Z: past 2^53, where a float division would round to ...124. */
const IN_NS = 1_764_580_000_123_999_999n;
const IN_MS = 1_764_580_000_123;

function row(overrides: Partial<LitequeueRow> = {}): LitequeueRow {
  return {
    rowid: 1n,
    data: Buffer.from('{"to":"ada@example.com"}'),
    messageId: ID,
    status: 0n,
    inTime: IN_NS,
    lockTime: null,
    doneTime: null,
    ...overrides,
  };
}

const target = { queue: "emails", task: "welcome.send" };

function mapped(r: LitequeueRow) {
  const m = mapLitequeueRow(r, target);
  if (!m.ok) throw new Error(m.problem);
  return m;
}

function problem(r: LitequeueRow): string {
  const m = mapLitequeueRow(r, target);
  if (m.ok) throw new Error(`expected a refusal, got job ${m.job.id}`);
  return m.problem;
}

describe("mapping a litequeue row to a job", () => {
  it("maps READY and LOCKED to queued, eligible since in_time, with a fresh attempt budget", () => {
    const ready = mapped(row({ status: 0n }));
    expect(ready.job).toMatchObject({
      id: ID,
      queue: "emails",
      task: "welcome.send",
      state: "queued",
      attempts: 0,
      deliveries: 0,
      maxAttempts: 3,
      retryBaseDelayMs: 15_000,
      priority: 0,
      scheduleTime: IN_MS,
      createTime: IN_MS,
      updateTime: IN_MS,
      finishTime: null,
      idempotencyKey: null,
      workerId: null,
      leaseExpireTime: null,
    });
    const locked = mapped(row({ status: 1n, lockTime: IN_NS + 5_000_000n }));
    expect(locked.job).toMatchObject({ state: "queued", attempts: 0, deliveries: 1, finishTime: null, updateTime: IN_MS + 5 });
    expect(locked.job.scheduleTime).toBe(IN_MS);
  });

  it("maps DONE to completed and FAILED to dead, finished at done_time", () => {
    const lock = IN_NS + 2_000_000n;
    // 123.999999 ms + 7.999999 ms past the second: 131.999998 ms, so 8 ms after in_time's millisecond.
    const done = IN_NS + 7_999_999n;
    const completed = mapped(row({ status: 2n, lockTime: lock, doneTime: done }));
    expect(completed.job).toMatchObject({ state: "completed", attempts: 1, deliveries: 1, finishTime: IN_MS + 8, updateTime: IN_MS + 8 });
    const dead = mapped(row({ status: 3n, lockTime: lock, doneTime: done }));
    expect(dead.job).toMatchObject({ state: "dead", attempts: 1, deliveries: 1, finishTime: IN_MS + 8, lastError: null });
  });

  it("falls back on lock_time, then in_time, for a finished message without done_time", () => {
    expect(mapped(row({ status: 2n, lockTime: IN_NS + 3_000_000n })).job.finishTime).toBe(IN_MS + 3);
    expect(mapped(row({ status: 3n })).job).toMatchObject({ finishTime: IN_MS, attempts: 0, deliveries: 0 });
  });

  it("turns nanoseconds into milliseconds exactly, rounding down", () => {
    expect(mapped(row({ inTime: 1_764_580_000_000_000_000n })).job.createTime).toBe(1_764_580_000_000);
    expect(mapped(row({ inTime: 1_764_580_000_000_999_999n })).job.createTime).toBe(1_764_580_000_000);
    expect(mapped(row({ inTime: IN_NS })).job.createTime).toBe(IN_MS);
  });

  it("records one SUBMITTED event at in_time that says where the job came from", () => {
    expect(mapped(row({ status: 3n, doneTime: IN_NS + 1_000_000n, lockTime: IN_NS })).event).toEqual({
      jobId: ID,
      queue: "emails",
      groupKey: "",
      kind: "submitted",
      fromState: null,
      toState: "dead",
      eventTime: IN_MS,
      workerId: null,
      attempt: 1,
      message: "imported from litequeue (status FAILED)",
    });
  });

  it("keeps the id, lower-cased as every stored id", () => {
    expect(mapped(row({ messageId: ID.toUpperCase() })).job.id).toBe(ID);
  });

  it("parses data that is JSON and keeps any other text as a JSON string", () => {
    const payload = (data: unknown) => mapped(row({ data })).job.payloadJson;
    expect(payload(Buffer.from('{ "to": "ada@example.com", "n": [1, 2] }'))).toBe('{"to":"ada@example.com","n":[1,2]}');
    expect(payload(Buffer.from("42"))).toBe("42");
    expect(payload(Buffer.from('"quoted"'))).toBe('"quoted"');
    expect(payload(Buffer.from("send the welcome mail"))).toBe('"send the welcome mail"');
    expect(payload(Buffer.from("{not json"))).toBe('"{not json"');
    expect(payload(Buffer.from("1e400"))).toBe('"1e400"');
    expect(payload(Buffer.from("Grüße ✉"))).toBe('"Grüße ✉"');
    expect(payload(null)).toBe("null");
  });

  it("refuses data that is not UTF-8, or over the payload bounds", () => {
    expect(problem(row({ data: Buffer.from([0x7b, 0xff, 0xfe]) }))).toBe(`row 1 (message_id ${ID}): data is not valid UTF-8 text`);
    expect(problem(row({ data: Buffer.from(JSON.stringify({ s: "x".repeat(70_000) })) }))).toMatch(/the limit is 65536 bytes/);
    expect(problem(row({ data: Buffer.from(`${"[".repeat(33)}${"]".repeat(33)}`) }))).toMatch(/nested more than 32 levels/);
    expect(mapped(row({ data: Buffer.from(`${"[".repeat(32)}${"]".repeat(32)}`) })).job.payloadJson).toHaveLength(64);
  });

  it("refuses rows whose status, id or times are not what litequeue writes, naming the row", () => {
    expect(problem(row({ status: "abc" }))).toBe(`row 1 (message_id ${ID}): status is the text "abc", not an integer`);
    expect(problem(row({ status: 1.5 }))).toMatch(/status is the real number 1.5, not an integer/);
    expect(problem(row({ status: null }))).toMatch(/status is NULL, not an integer/);
    expect(problem(row({ status: 4n }))).toMatch(/status 4 is not a litequeue status \(0 READY, 1 LOCKED, 2 DONE, 3 FAILED\)/);
    expect(problem(row({ status: -1n }))).toMatch(/status -1 is not a litequeue status/);
    expect(problem(row({ rowid: 7n, messageId: null }))).toBe("row 7: message_id is NULL");
    expect(problem(row({ messageId: 42n }))).toMatch(/message_id is bigint 42, not text/);
    expect(problem(row({ messageId: "0f3c9a2b4d5e6f708192a3b4c5d6e7f8" }))).toMatch(/is not a UUID/);
    expect(problem(row({ inTime: null }))).toMatch(/in_time is NULL/);
    expect(problem(row({ inTime: "yesterday" }))).toMatch(/in_time is the text "yesterday", not an integer/);
    expect(problem(row({ inTime: 1_733_000_000n }))).toMatch(/in_time 1733000000 is not a time in nanoseconds/);
    expect(problem(row({ status: 2n, doneTime: 2.5 }))).toMatch(/done_time is the real number 2.5/);
  });
});
