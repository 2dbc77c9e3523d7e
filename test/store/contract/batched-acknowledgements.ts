/**
 * Batched acknowledgements: Acknowledge and Work issue one store call per
 * acknowledgement in the same turn; the store must keep them independent
 * and in order.
 */
import { describe, expect, it } from "vitest";
import type { QueueError } from "../../../src/domain/errors.js";
import type { CommittedChange } from "../../../src/store/store.js";
import { claimLeases } from "../../helpers/store.js";
import { clock, kinds, MINUTE, newJob, SECOND, store } from "./helpers.js";

export function describeBatchedAcknowledgements(): void {
  describe("batched acknowledgements", () => {
    async function claimMany(n: number, leaseDurationMs = MINUTE) {
      await store.submit(Array.from({ length: n }, (_, i) => newJob({ task: `t${i}` })));
      const leases = await claimLeases(store, { queue: "billing", workerId: "worker-1", leaseDurationMs, maxJobs: n });
      expect(leases).toHaveLength(n);
      return leases;
    }

    it("applies mixed outcomes issued together, each on its own", async () => {
      const [a, b, c, d] = await claimMany(4);
      const results = await Promise.allSettled([
        store.complete(a.job.id, a.leaseToken, '{"ok":true}'),
        store.fail(b.job.id, b.leaseToken, { error: "boom", permanent: false }),
        store.heartbeat(c.job.id, c.leaseToken, 2 * MINUTE),
        store.release(d.job.id, d.leaseToken),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
      expect((await store.getJob(a.job.id))!.state).toBe("completed");
      expect((await store.getJob(b.job.id))!.state).toBe("retry");
      expect((await store.getJob(c.job.id))!.leaseExpireTime).toBe(clock.now() + 2 * MINUTE);
      expect((await store.getJob(d.job.id))!.state).toBe("queued");
    });

    it("refuses stale and expired tokens without affecting good ones next to them", async () => {
      const [short] = await claimMany(1, SECOND);
      const [good, stale] = await (async () => {
        await store.submit([newJob({ queue: "other" }), newJob({ queue: "other" })]);
        return claimLeases(store, { queue: "other", workerId: "worker-2", leaseDurationMs: MINUTE, maxJobs: 2 });
      })();
      clock.advance(2 * SECOND);
      const results = await Promise.allSettled([
        store.complete(short.job.id, short.leaseToken, null),
        store.complete(good.job.id, good.leaseToken, null),
        store.complete(stale.job.id, "not-the-token", null),
        store.complete("01900000-0000-7000-8000-000000000000", "x", null),
      ]);
      const reasons = results.map((r) => (r.status === "rejected" ? (r.reason as QueueError).reason : "ok"));
      expect(reasons).toEqual(["LEASE_EXPIRED", "ok", "LEASE_REJECTED", "JOB_NOT_FOUND"]);
      expect((await store.getJob(good.job.id))!.state).toBe("completed");
      expect((await store.getJob(stale.job.id))!.state).toBe("running");
    });

    it("applies two acknowledgements of one job in the order they were issued", async () => {
      const [lease] = await claimMany(1);
      const results = await Promise.allSettled([
        store.heartbeat(lease.job.id, lease.leaseToken),
        store.complete(lease.job.id, lease.leaseToken, "1"),
        store.complete(lease.job.id, lease.leaseToken, "2"),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
      expect((await store.getJob(lease.job.id))!.resultJson).toBe("1");
      expect(await kinds(lease.job.id)).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "heartbeat:running>running",
        "completed:running>completed",
      ]);
    });

    it("commits nothing and announces nothing when every acknowledgement is refused", async () => {
      const leases = await claimMany(3);
      const seen: CommittedChange[] = [];
      const off = store.onCommitted((c) => seen.push(c));
      const results = await Promise.allSettled(leases.map((l) => store.complete(l.job.id, "wrong", null)));
      off();
      expect(results.every((r) => r.status === "rejected")).toBe(true);
      expect(seen).toHaveLength(0);
      for (const l of leases) expect((await store.getJob(l.job.id))!.state).toBe("running");
    });

    it("applies a thousand acknowledgements issued together", async () => {
      const leases = await claimMany(100);
      const calls = Array.from({ length: 1000 }, (_, i) => {
        const l = leases[i % 100];
        return i < 900 ? store.heartbeat(l.job.id, l.leaseToken) : store.complete(l.job.id, l.leaseToken, null);
      });
      const results = await Promise.allSettled(calls);
      expect(results.every((r) => r.status === "fulfilled")).toBe(true);
      expect((await store.queueCounts()).find((q) => q.queue === "billing")!.counts).toMatchObject({ running: 0, completed: 100 });
    });
  });
}
