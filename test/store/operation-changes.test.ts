/**
 * How the shared write path hands a transaction's counts and events to an
 * engine's port (store/operation-changes.ts): once per transaction, counts
 * summed per queue and state (so PostgreSQL can write delta rows rather than
 * update one hot row per operation), events last and in operation order (so
 * an engine numbers them right before its commit).
 */
import { describe, expect, it } from "vitest";
import type { EventDraft, StoredJob } from "../../src/domain/job.js";
import * as machine from "../../src/domain/state-machine.js";
import { newStoredJob } from "../../src/domain/submission.js";
import { OperationChanges, TransactionChanges } from "../../src/store/operation-changes.js";
import type { CountDelta, TransactionPort } from "../../src/store/transaction-port.js";
import { newJob } from "./contract/helpers.js";

/** A port that only records the two calls persist may make, in order. */
function recordingPort() {
  const calls: Array<["addCountDeltas", CountDelta[]] | ["insertEvents", EventDraft[]]> = [];
  const port = {
    addCountDeltas: (deltas: readonly CountDelta[]) => void calls.push(["addCountDeltas", [...deltas]]),
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
    expect(calls.map(([name]) => name)).toEqual(["addCountDeltas", "insertEvents"]);
    // billing/queued +1 -1 is left out; billing/cancelled +1; emails/queued +1.
    expect((calls[0][1] as CountDelta[]).sort((x, y) => x.queue.localeCompare(y.queue) || x.state.localeCompare(y.state))).toEqual([
      { queue: "billing", state: "cancelled", delta: 1 },
      { queue: "emails", state: "queued", delta: 1 },
    ]);
    expect((calls[1][1] as EventDraft[]).map((e) => [e.jobId, e.kind])).toEqual([
      [a.job.id, "submitted"],
      [b.job.id, "submitted"],
      [a.job.id, "cancelled"],
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
});
