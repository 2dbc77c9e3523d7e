/**
 * Several PgStore instances on one schema (as several servers), writing at
 * once: every instance announces every event committed through any of
 * them exactly once, in strictly increasing sequence order with no gap;
 * a reader resuming at any point (listEvents after N) gets exactly the rest;
 * claims never hand one job to two instances; and each instance marks its
 * own events as not external.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { openPgStore, type PgStore } from "../../../src/store/postgres/pg-store.js";
import type { JobEvent } from "../../../src/domain/job.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";
import { newJob, recordAnnouncements } from "../contract/helpers.js";
import { claimLeases } from "../../helpers/store.js";
import { until } from "../../helpers/until.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("PgStore: several instances on one schema", () => {
  const db = useTestSchema(probe, "instances");

  it("announce every event of all writers once, in order, and never lease a job twice", async () => {
    const clock = new ManualClock(Date.UTC(2026, 11, 1, 12));
    const open = (migrate: boolean) =>
      openPgStore({
        url: db.url,
        schema: db.schema,
        clock,
        databaseClock: clock,
        poolSize: 6,
        statementTimeoutMs: 0,
        migrate,
        catchUpIntervalMs: 100,
      });
    const stores: PgStore[] = [await open(true)];
    stores.push(await open(false), await open(false));
    try {
      await Promise.all(stores.map((s) => s.whenListening()));
      const seen = stores.map((s) => recordAnnouncements(s));

      // Each instance: producers submitting in batches, claimers completing, all at once.
      const JOBS_PER_STORE = 150;
      const total = JOBS_PER_STORE * stores.length;
      const leased = new Map<string, number>();
      const work = stores.map(async (store, k) => {
        const submits = Array.from({ length: JOBS_PER_STORE / 30 }, (_, b) =>
          store.submit(Array.from({ length: 30 }, (_, i) => newJob({ queue: "shared", payloadJson: `{"s":${k},"b":${b},"i":${i}}` }))),
        );
        // Each claimer goes on until every job of all the instances was leased (not until a few empty claims
        // in a row, which a submit slower than they are would end too early).
        const claimers = Array.from({ length: 4 }, async () => {
          for (;;) {
            const leases = await until(
              `a lease through instance ${k}, or every job leased (${leased.size} of ${total} so far)`,
              async () => {
                if (leased.size === total) return "all leased";
                const got = await claimLeases(store, { queue: "shared", workerId: `w${k}`, leaseDurationMs: 60_000, maxJobs: 7 });
                return got.length > 0 ? got : undefined;
              },
              { pollMs: 20 },
            );
            if (leases === "all leased") return;
            for (const l of leases) leased.set(l.job.id, (leased.get(l.job.id) ?? 0) + 1);
            await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
          }
        });
        await Promise.all([...submits, ...claimers]);
      });
      await Promise.all(work);

      expect(leased.size).toBe(total);
      expect([...leased.values()].every((n) => n === 1)).toBe(true);

      // Submitted, claimed, completed: three events per job, numbered 1..3n.
      const all = await stores[0].listEvents({ afterSequence: 0, limit: 10 * total });
      expect(all.map((e) => e.sequence)).toEqual(Array.from({ length: 3 * total }, (_, i) => i + 1));
      await Promise.all(seen.map((r) => r.through(3 * total)));
      for (const r of seen) {
        const sequences = r.sequences();
        expect(sequences).toEqual(Array.from({ length: 3 * total }, (_, i) => i + 1));
      }
      // Own events are not external, the others' are.
      const ownIds = (k: number) =>
        new Set(
          all
            .filter((e: JobEvent) => e.kind === "submitted")
            .filter((e) => seen[k].events().find((x) => x.sequence === e.sequence)?.external === false)
            .map((e) => e.jobId),
        );
      const owned = [0, 1, 2].map(ownIds);
      expect(owned.reduce((n, s) => n + s.size, 0)).toBe(total);
      // A resume at any point gets exactly the rest.
      for (const after of [0, 1, 17, Math.floor((3 * total) / 2), 3 * total - 1, 3 * total]) {
        const rest = await stores[2].listEvents({ afterSequence: after, limit: 10 * total });
        expect(rest.map((e) => e.sequence)).toEqual(Array.from({ length: 3 * total - after }, (_, i) => after + i + 1));
      }
      const counts = (await stores[1].queueCounts()).find((q) => q.queue === "shared")!.counts;
      expect(counts).toMatchObject({ queued: 0, running: 0, completed: total });
    } finally {
      for (const s of stores) await s.close();
    }
  }, 60_000);
});
