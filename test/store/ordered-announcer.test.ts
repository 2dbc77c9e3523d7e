/**
 * The ordered announcer both engines announce through
 * (src/store/announcing/ordered-announcer.ts), over a list of stored events whose
 * reads answer at once (as SQLite's) or when the test lets them (as
 * PostgreSQL's). The engines' own tests (the contract on both engines,
 * test/store/postgres/event-sequencer.test.ts) cover it over real databases.
 */
import { describe, expect, it } from "vitest";
import type { JobEvent } from "../../src/domain/job.js";
import { OrderedAnnouncer, type OrderedAnnouncerOptions } from "../../src/store/announcing/ordered-announcer.js";
import { settledNow } from "../../src/store/operations/steps.js";

const event = (sequence: number) => ({ sequence, jobId: `job-${sequence}` }) as JobEvent;
const sequences = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Events 1..`stored` in a table; `pages` records what each announcement held. */
function announcer(stored: number, options: Partial<OrderedAnnouncerOptions> = {}) {
  const table = sequences(1, stored).map(event);
  const reads: number[] = [];
  const pages: number[][] = [];
  const announce = (events: JobEvent[]) => pages.push(events.map((e) => e.sequence));
  const a = new OrderedAnnouncer({
    announcedThrough: 0,
    readAfter: (after, limit) => {
      reads.push(after);
      return table.filter((e) => e.sequence > after).slice(0, limit);
    },
    listening: () => true,
    pageSize: 4,
    ...options,
  });
  return { a, table, reads, pages, announce };
}

describe("OrderedAnnouncer", () => {
  it("announces each stored event once, oldest first, a page at a time, up to the sequence asked", () => {
    const { a, pages, announce } = announcer(20);
    settledNow(a.announceThrough(10, announce));
    expect(pages).toEqual([sequences(1, 4), sequences(5, 8), [9, 10]]);
    expect(a.announcedThrough).toBe(10);
    settledNow(a.announceThrough(10, announce));
    settledNow(a.announceThrough(7, announce));
    expect(pages).toHaveLength(3);
    settledNow(a.announceThrough(12, announce));
    expect(pages.at(-1)).toEqual([11, 12]);
  });

  it("runs at once when its reads answer at once", () => {
    const { a, pages, announce } = announcer(3);
    expect(a.announceThrough(3, announce)).toBeUndefined();
    expect(pages).toEqual([[1, 2, 3]]);
  });

  it("ends a read at the sequence asked when events below it are gone (pruned meanwhile)", () => {
    const { a, table, reads, pages, announce } = announcer(10);
    table.splice(2, 5); // 3..7 pruned
    settledNow(a.announceThrough(7, announce));
    expect(pages).toEqual([[1, 2]]);
    expect(a.announcedThrough).toBe(7);
    settledNow(a.announceThrough(9, announce));
    expect(pages).toEqual([
      [1, 2],
      [8, 9],
    ]);
    table.splice(2); // everything after 2 pruned
    settledNow(a.announceThrough(10, announce));
    expect(reads).toEqual([0, 7, 9]);
    expect(a.announcedThrough).toBe(10);
    expect(pages).toHaveLength(2);
  });

  it("hands on events the caller holds without a read when they follow the last one announced, and reads otherwise", () => {
    const { a, reads, pages, announce } = announcer(12);
    settledNow(a.announceThrough(4, announce));
    settledNow(a.announceThrough(6, announce, [event(5), event(6)]));
    expect(reads).toEqual([0]);
    expect(pages).toEqual([sequences(1, 4), [5, 6]]);
    // Held events after a gap: the gap is read first, from the table.
    settledNow(a.announceThrough(10, announce, [event(9), event(10)]));
    expect(reads).toEqual([0, 6]);
    expect(pages.at(-1)).toEqual([7, 8, 9, 10]);
  });

  it("passes over events unread while nobody listens, and announces only those committed after", () => {
    let listening = false;
    let passedOver = 0;
    const { a, reads, pages, announce } = announcer(10, { listening: () => listening, passedOver: () => passedOver++ });
    settledNow(a.announceThrough(6, announce, [event(5), event(6)]));
    expect(reads).toEqual([]);
    expect(pages).toEqual([]);
    expect(passedOver).toBe(1);
    listening = true;
    settledNow(a.announceThrough(8, announce));
    expect(pages).toEqual([[7, 8]]);
  });

  it("counts the engine's own announcements, reading only what follows them", () => {
    const { a, reads, pages, announce } = announcer(10);
    a.announcedUpTo(5);
    a.announcedUpTo(3);
    expect(a.announcedThrough).toBe(5);
    settledNow(a.announceThrough(7, announce));
    expect(reads).toEqual([5]);
    expect(pages).toEqual([[6, 7]]);
  });

  describe("over reads that wait", () => {
    /** Reads that answer when the test releases them, in any order. */
    function waiting(stored: number) {
      const table = sequences(1, stored).map(event);
      const reads: Array<{ after: number; answer: () => void; fail: (e: Error) => void }> = [];
      const pages: number[][] = [];
      const announce = (events: JobEvent[]) => pages.push(events.map((e) => e.sequence));
      const a = new OrderedAnnouncer({
        announcedThrough: 0,
        readAfter: (after, limit) =>
          new Promise<JobEvent[]>((resolve, reject) =>
            reads.push({ after, answer: () => resolve(table.filter((e) => e.sequence > after).slice(0, limit)), fail: reject }),
          ),
        listening: () => true,
        pageSize: 4,
      });
      return { a, reads, pages, announce };
    }
    const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

    it("lets a later call start only after the earlier one's last page, so announcements keep sequence order", async () => {
      const { a, reads, pages, announce } = waiting(20);
      const first = a.announceThrough(6, announce);
      const second = a.announceThrough(9, announce, [event(9)]);
      await settle();
      expect(reads.map((r) => r.after)).toEqual([0]);
      reads[0].answer();
      await settle();
      expect(reads.map((r) => r.after)).toEqual([0, 4]);
      reads[1].answer();
      await first;
      // The second call's held event does not follow 6 directly: 7 and 8 are read first.
      await settle();
      expect(reads.map((r) => r.after)).toEqual([0, 4, 6]);
      reads[2].answer();
      await second;
      expect(pages).toEqual([sequences(1, 4), [5, 6], [7, 8, 9]]);
      await a.idle();
    });

    it("fails only the call whose read failed; the next reads from where it stopped", async () => {
      const { a, reads, pages, announce } = waiting(12);
      const failing = a.announceThrough(10, announce);
      const next = a.announceThrough(10, announce);
      await settle();
      reads[0].answer();
      await settle();
      reads[1].fail(new Error("connection lost"));
      await expect(failing).rejects.toThrow("connection lost");
      await settle();
      expect(reads.map((r) => r.after)).toEqual([0, 4, 4]);
      reads[2].answer();
      await settle();
      reads[3].answer();
      await next;
      expect(pages).toEqual([sequences(1, 4), sequences(5, 8), [9, 10]]);
    });
  });
});
