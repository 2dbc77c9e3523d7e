/**
 * Heartbeat events: a lease's first heartbeat stored, then at most one a
 * minute, the rest announced as unrecorded, every transition kept.
 */
import { describe, expect, it } from "vitest";
import { HEARTBEAT_EVENT_INTERVAL_MS } from "../../../src/domain/state-machine.js";
import type { CommittedChange } from "../../../src/store/store.js";
import { claimOne, clock, kinds, MINUTE, SECOND, store, submitOne } from "./helpers.js";

export function describeHeartbeatEvents(): void {
  describe("heartbeat events", () => {
    it("stores a lease's first heartbeat, then at most one a minute, while every heartbeat extends the lease", async () => {
      const job = await submitOne();
      const lease = await claimOne("billing", 30 * SECOND);
      const announced: CommittedChange[] = [];
      const off = store.onCommitted((c) => announced.push(c));
      // A heartbeat every 10 s for 130 s: stored at 10 s, 70 s and 130 s.
      for (let i = 1; i <= 13; i++) {
        clock.advance(10 * SECOND);
        const beat = await store.heartbeat(job.id, lease.leaseToken);
        expect(beat.leaseExpireTime).toBe(clock.now() + 30 * SECOND);
      }
      off();
      const events = await store.listJobEvents(job.id);
      const beats = events.filter((e) => e.kind === "heartbeat");
      expect(beats.map((e) => e.eventTime - lease.job.updateTime)).toEqual([10 * SECOND, 70 * SECOND, 130 * SECOND]);
      expect(HEARTBEAT_EVENT_INTERVAL_MS).toBe(MINUTE);
      // The others were announced as unrecorded (for counting), with no sequence.
      expect(announced.flatMap((c) => c.events).map((e) => e.sequence)).toEqual(beats.map((e) => e.sequence));
      const unrecorded = announced.flatMap((c) => c.unrecorded);
      expect(unrecorded).toHaveLength(10);
      expect(unrecorded.every((e) => e.kind === "heartbeat" && e.jobId === job.id && !("sequence" in e))).toBe(true);
    });

    it("stores the first heartbeat of every new lease", async () => {
      const job = await submitOne();
      const first = await claimOne("billing", 20 * SECOND);
      clock.advance(SECOND);
      await store.heartbeat(job.id, first.leaseToken);
      clock.advance(20 * SECOND);
      const second = await claimOne("billing", 20 * SECOND, "worker-2");
      clock.advance(SECOND);
      await store.heartbeat(job.id, second.leaseToken);
      expect(await kinds(job.id)).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "heartbeat:running>running",
        "lease_expired:running>retry",
        "claimed:retry>running",
        "heartbeat:running>running",
      ]);
    });

    it("keeps every state transition however many heartbeats are coalesced", async () => {
      const job = await submitOne({ maxAttempts: 3, retryBaseDelayMs: 0 });
      let lease = await claimOne("billing", MINUTE);
      for (let i = 0; i < 20; i++) {
        clock.advance(SECOND);
        await store.heartbeat(job.id, lease.leaseToken);
      }
      await store.fail(job.id, lease.leaseToken, { error: "flaky", permanent: false });
      lease = await claimOne("billing", MINUTE);
      // Twenty heartbeats and the completion issued together (one commit, applied in order).
      const calls = [
        ...Array.from({ length: 20 }, () => store.heartbeat(job.id, lease.leaseToken)),
        store.complete(job.id, lease.leaseToken, '"done"'),
      ];
      const results = await Promise.allSettled(calls);
      expect(results.every((r) => r.status === "fulfilled")).toBe(true);
      expect((await store.getJob(job.id))!.state).toBe("completed");
      const timeline = await kinds(job.id);
      expect(timeline.filter((k) => !k.startsWith("heartbeat"))).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "failed:running>retry",
        "claimed:retry>running",
        "completed:running>completed",
      ]);
      expect(timeline.filter((k) => k.startsWith("heartbeat"))).toHaveLength(2);
    });
  });
}
