/**
 * The store contract: every Store implementation (SQLite and PostgreSQL) runs
 * this suite unchanged. It covers every transition and refusal of the state
 * machine of docs/api.md "Job states", with a manual clock and no sleeps, and
 * the announcement guarantees of store.ts, also across two store instances on
 * one database, and schedules (run times across daylight-saving changes,
 * missed runs after downtime, each run once with two instances, reopen),
 * groups (groups.ts: fair turns, the group bounds, ordered heads),
 * queue activity (queue-activity.ts: the per-minute samples, read alike by
 * every instance, pruned by age), and the trace context a job carries
 * (trace-context.ts).
 *
 * One file per area, each a describe block over the store of the test that
 * runs (helpers.ts); describeStoreContract runs them all for one engine, and
 * describeClockSkewContract (clock.ts) the cases of a database that keeps
 * the time.
 */
import { describe, expect, it } from "vitest";
import { describeSubmit } from "./submit.js";
import { describeClaim } from "./claim.js";
import { describeHeartbeat } from "./heartbeat.js";
import { describeCompleteAndFail } from "./complete-fail.js";
import { describeLeaseExpiry } from "./lease-expiry.js";
import { describeRelease } from "./release.js";
import { describeSnooze } from "./snooze.js";
import { describeRedriveAndCancel } from "./redrive-cancel.js";
import { describeQueueControls } from "./queue-controls.js";
import { describeQueueLimits } from "./queue-limits.js";
import { describeReads } from "./reads.js";
import { describeQueueBacklog } from "./queue-backlog.js";
import { describeSchedules } from "./schedules.js";
import { describeCommitAnnouncements } from "./commit-announcements.js";
import { describeBatchedAcknowledgements } from "./batched-acknowledgements.js";
import { describeRetention } from "./retention.js";
import { describeHeartbeatEvents } from "./heartbeat-events.js";
import { describeProgress } from "./progress.js";
import { describeSeveralInstances } from "./instances.js";
import { describeGroups } from "./groups.js";
import { describeQueueActivity } from "./queue-activity.js";
import { describeTraceContext } from "./trace-context.js";
import { describeDependencies, describeDependencyModel } from "./dependencies.js";
import { store, useContractStore, type StoreFactory } from "./helpers.js";

export { describeClockSkewContract, type SkewedStoreFactory, type SkewedStoreHarness } from "./clock.js";
export type { StoreFactory, StoreHarness } from "./helpers.js";

export function describeStoreContract(name: string, factory: StoreFactory): void {
  describe(`Store contract: ${name}`, () => {
    useContractStore(factory);

    describeSubmit();
    describeClaim();
    describeHeartbeat();
    describeCompleteAndFail();
    describeLeaseExpiry();
    describeRelease();
    describeSnooze();
    describeRedriveAndCancel();
    describeQueueControls();
    describeQueueLimits();
    describeReads();
    describeQueueBacklog();
    describeSchedules();
    describeCommitAnnouncements();
    describeBatchedAcknowledgements();
    describeRetention();
    describeHeartbeatEvents();
    describeProgress();
    describeSeveralInstances();
    describeGroups();
    describeQueueActivity();
    describeTraceContext();
    describeDependencies();
    describeDependencyModel();

    it("reports itself writable", async () => {
      await expect(store.checkWritable()).resolves.toBeUndefined();
    });
  });
}
