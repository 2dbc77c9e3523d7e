/**
 * Progress: the latest report kept on the job, and a PROGRESS event stored
 * at most once a second per job, across leases.
 */
import { describe, expect, it } from "vitest";
import { PROGRESS_EVENT_INTERVAL_MS } from "../../../src/domain/state-machine.js";
import { claimOne, clock, kinds, MINUTE, recordAnnouncements, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeProgress(): void {
  describe("progress", () => {
    it("stores the latest progress on the job, shown by getJob and listJobs, kept by heartbeats without one", async () => {
      const submitted = await submitOne();
      expect(submitted.progressJson).toBeNull();
      const lease = await claimOne();
      clock.advance(SECOND);
      const beat = await store.heartbeat(submitted.id, lease.leaseToken, undefined, '{"done":3,"of":10}');
      expect(beat.progressJson).toBe('{"done":3,"of":10}');
      clock.advance(SECOND);
      await store.heartbeat(submitted.id, lease.leaseToken);
      expect((await store.getJob(submitted.id))!.progressJson).toBe('{"done":3,"of":10}');
      await store.heartbeat(submitted.id, lease.leaseToken, undefined, "null");
      expect((await store.getJob(submitted.id))!.progressJson).toBe("null");
      await store.heartbeat(submitted.id, lease.leaseToken, 2 * MINUTE, '"rendering"');
      const completed = await store.complete(submitted.id, lease.leaseToken, '"ok"');
      expect(completed).toMatchObject({ state: "completed", progressJson: '"rendering"' });
      expect((await store.listJobs({ limit: 10 }))[0].progressJson).toBe('"rendering"');
    });

    it("keeps no progress from a refused heartbeat", async () => {
      const submitted = await submitOne();
      const lease = await claimOne("billing", SECOND);
      expect((await refusal(store.heartbeat(submitted.id, "wrong", undefined, "1"))).reason).toBe("LEASE_REJECTED");
      clock.advance(SECOND);
      expect((await refusal(store.heartbeat(submitted.id, lease.leaseToken, undefined, "2"))).reason).toBe("LEASE_EXPIRED");
      expect((await store.getJob(submitted.id))!.progressJson).toBeNull();
      expect((await kinds(submitted.id)).some((k) => k.startsWith("progress"))).toBe(false);
    });

    it("stores a PROGRESS event at most once a second per job, announcing the rest as unrecorded", async () => {
      const submitted = await submitOne();
      const lease = await claimOne("billing", MINUTE);
      const announced = recordAnnouncements(store);
      // Progress every 250 ms for 2.5 s: stored at 250 ms, 1250 ms and 2250 ms.
      for (let i = 1; i <= 10; i++) {
        clock.advance(250);
        const beat = await store.heartbeat(submitted.id, lease.leaseToken, undefined, JSON.stringify({ step: i }));
        expect(beat.progressJson).toBe(JSON.stringify({ step: i }));
      }
      announced.off();
      expect(PROGRESS_EVENT_INTERVAL_MS).toBe(SECOND);
      const progress = (await store.listJobEvents(submitted.id)).filter((e) => e.kind === "progress");
      expect(progress.map((e) => [e.eventTime - lease.job.updateTime, e.message])).toEqual([
        [250, '{"step":1}'],
        [1250, '{"step":5}'],
        [2250, '{"step":9}'],
      ]);
      expect(progress.every((e) => e.fromState === "running" && e.toState === "running" && e.workerId === "worker-1")).toBe(true);
      expect(
        announced
          .events()
          .filter((e) => e.kind === "progress")
          .map((e) => e.sequence),
      ).toEqual(progress.map((e) => e.sequence));
      const unrecorded = announced.changes.flatMap((c) => c.unrecorded).filter((e) => e.kind === "progress");
      expect(unrecorded.map((e) => e.message)).toEqual([2, 3, 4, 6, 7, 8, 10].map((step) => JSON.stringify({ step })));
      // However many were left unrecorded, the job shows the latest.
      expect((await store.getJob(submitted.id))!.progressJson).toBe('{"step":10}');
    });

    it("holds the policy per job across leases, and a new lease sees the progress reported before", async () => {
      const submitted = await submitOne();
      let lease = await claimOne();
      await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"half"');
      await store.snooze(submitted.id, lease.leaseToken, 0);
      clock.advance(500);
      lease = await claimOne();
      expect(lease.job.progressJson).toBe('"half"');
      await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"more"');
      clock.advance(500);
      await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"most"');
      expect((await kinds(submitted.id)).filter((k) => !k.startsWith("heartbeat"))).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "progress:running>running",
        "snoozed:running>queued",
        "claimed:queued>running",
        "progress:running>running",
      ]);
      expect((await store.listJobEvents(submitted.id)).filter((e) => e.kind === "progress").map((e) => e.message)).toEqual([
        '"half"',
        '"most"',
      ]);
    });
  });
}
