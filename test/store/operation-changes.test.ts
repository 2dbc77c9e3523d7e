/**
 * How the shared write path hands a transaction's counts, queue activity
 * and events to an engine's port (store/operations/operation-changes.ts): once per
 * transaction, counts summed per queue and state and activity per queue and
 * minute (so PostgreSQL can write delta rows rather than update one hot row
 * per operation), events last and in operation order (so an engine numbers
 * them right before its commit).
 */
import { describe, expect, it } from "vitest";
import type { EventDraft, StoredJob } from "../../src/domain/job.js";
import * as machine from "../../src/domain/state-machine.js";
import { newStoredJob } from "../../src/domain/submission.js";
import { OperationChanges, TransactionChanges } from "../../src/store/operations/operation-changes.js";
import { newLeaseToken } from "../../src/domain/lease-token.js";
import { LEASE_WAIT_BUCKETS, leaseWaitBucket } from "../../src/domain/queue-activity.js";
import type { ActivityDelta, CountDelta, TransactionPort } from "../../src/store/transaction-port.js";
import { newJob } from "./contract/helpers.js";

/** A port that only records the three calls persist may make, in order. */
function recordingPort() {
  const calls: Array<["addCountDeltas", CountDelta[]] | ["addActivity", ActivityDelta[]] | ["insertEvents", EventDraft[]]> = [];
  const port = {
    addCountDeltas: (deltas: readonly CountDelta[]) => void calls.push(["addCountDeltas", [...deltas]]),
    addActivity: (deltas: readonly ActivityDelta[]) => void calls.push(["addActivity", [...deltas]]),
    insertEvents: (drafts: readonly EventDraft[]) => {
      calls.push(["insertEvents", [...drafts]]);
      return Promise.resolve(drafts.map((d, i) => ({ sequence: 100 + i, ...d })));
    },
  } as unknown as TransactionPort;
  return { port, calls };
}

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function submitted(queue = "billing"): { changes: OperationChanges; job: StoredJob } {
  const job = newStoredJob(newJob({ queue }), NOW);
  const changes = new OperationChanges();
  changes.created(job);
  return { changes, job };
}

describe("a transaction's changes", () => {
  it("writes the counts once, summed per queue and state and without zeros, then the events in operation order", async () => {
    const a = submitted();
    const b = submitted("emails");
    const cancel = new OperationChanges();
    cancel.transitioned("queued", machine.cancel(a.job, NOW, "no"));
    const tx = new TransactionChanges();
    for (const op of [a.changes, b.changes, cancel]) tx.add(op);

    const { port, calls } = recordingPort();
    const persisted = await tx.persist(port);
    expect(calls.map(([name]) => name)).toEqual(["addCountDeltas", "addActivity", "insertEvents"]);
    // billing/queued +1 -1 is left out; billing/cancelled +1; emails/queued +1.
    expect((calls[0][1] as CountDelta[]).sort((x, y) => x.queue.localeCompare(y.queue) || x.state.localeCompare(y.state))).toEqual([
      { queue: "billing", state: "cancelled", delta: 1 },
      { queue: "emails", state: "queued", delta: 1 },
    ]);
    expect((calls[2][1] as EventDraft[]).map((e) => [e.jobId, e.kind])).toEqual([
      [a.job.id, "submitted"],
      [b.job.id, "submitted"],
      [a.job.id, "cancelled"],
    ]);
    // The activity: billing's queued +1 -1 nets to nothing and is left out; emails' one more queued job.
    expect(calls[1][1]).toEqual([
      {
        queue: "emails",
        minute: NOW,
        completed: 0,
        failed: 0,
        queued: 1,
        retry: 0,
        running: 0,
        leaseWaits: new Array(LEASE_WAIT_BUCKETS).fill(0),
      },
    ]);
    expect(persisted.events.map((e) => e.sequence)).toEqual([100, 101, 102]);
    expect(tx.changedJobs()).toEqual(new Set([a.job.id, b.job.id]));
  });

  it("asks the port for nothing when nothing changed, and keeps heartbeats that were not stored apart", async () => {
    const { port, calls } = recordingPort();
    expect(await new TransactionChanges().persist(port)).toEqual({ events: [], unrecorded: [], queueControls: [] });
    expect(calls).toEqual([]);

    const running: StoredJob = { ...submitted().job, state: "running", workerId: "w", leaseExpireTime: NOW + 60_000 };
    const heartbeat: EventDraft = { ...machine.submitted(running).events[0], kind: "heartbeat", fromState: "running" };
    // A heartbeat the heartbeat policy did not store: no count change, no event to write, announced apart.
    const beat = new OperationChanges();
    beat.transitioned("running", { job: running, events: [], unrecorded: [heartbeat] });
    const tx = new TransactionChanges();
    tx.add(beat);
    const persisted = await tx.persist(port);
    expect(calls).toEqual([]);
    expect(persisted.unrecorded.map((e) => e.kind)).toEqual(["heartbeat"]);
  });

  it("sums a transaction's queue activity per queue and minute: completions, failed attempts, lease waits and count changes", () => {
    const tx = new TransactionChanges();
    const a = submitted();
    tx.add(a.changes);
    const { token, hash } = newLeaseToken();
    const lease = { workerId: "w", leaseDurationMs: 120_000, tokenHash: hash };
    const claim = new OperationChanges();
    const claimed = machine.claim(a.job, NOW + 2_000, lease);
    claim.transitioned("queued", claimed);
    tx.add(claim);
    // A minute later: the attempt fails, is claimed again at once, and completes.
    const later = NOW + 61_000;
    const fail = new OperationChanges();
    const failed = machine.fail(claimed.job, token, later, { error: "boom", permanent: false, retryDelayMs: 0 });
    fail.transitioned("running", failed);
    tx.add(fail);
    const again = new OperationChanges();
    const reclaimed = machine.claim(failed.job, later, lease);
    again.transitioned("retry", reclaimed);
    const done = machine.complete(reclaimed.job, token, later, null);
    again.transitioned("running", done);
    tx.add(again);

    const waits = (...ms: number[]) => {
      const buckets = new Array<number>(LEASE_WAIT_BUCKETS).fill(0);
      for (const w of ms) buckets[leaseWaitBucket(w)]++;
      return buckets;
    };
    expect(tx.toWrite().activity).toEqual([
      { queue: "billing", minute: NOW, completed: 0, failed: 0, queued: 0, retry: 0, running: 1, leaseWaits: waits(2_000) },
      { queue: "billing", minute: NOW + 60_000, completed: 1, failed: 1, queued: 0, retry: 0, running: -1, leaseWaits: waits(0) },
    ]);
  });
});
