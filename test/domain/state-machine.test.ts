/**
 * The pure state machine (src/domain/state-machine.ts), table-driven and
 * without a database: every (state, action) pair gives either the next
 * state and the events it records, or a refusal code. The fixtures are
 * frozen, so a function that changed the job it was given would throw.
 */
import { describe, expect, it } from "vitest";
import { QueueError } from "../../src/domain/errors.js";
import { JOB_STATES, type JobState, type StoredJob } from "../../src/domain/job.js";
import { hashLeaseToken } from "../../src/domain/lease-token.js";
import * as machine from "../../src/domain/state-machine.js";

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const MINUTE = 60_000;
const TOKEN = "the-current-lease-token";
const TOKEN_HASH = hashLeaseToken(TOKEN);

/** A job as it is stored in `state`, after a typical history; `patch` adjusts it. */
function jobIn(state: JobState, patch: Partial<StoredJob> = {}): StoredJob {
  const base: StoredJob = {
    id: "019ad5a2-7b3c-7def-8123-456789abcdef",
    queue: "billing",
    task: "invoice.generate",
    groupKey: "",
    payloadJson: "{}",
    priority: 0,
    state,
    attempts: 0,
    maxAttempts: 3,
    retryBaseDelayMs: 15_000,
    scheduleTime: NOW - MINUTE,
    createTime: NOW - 10 * MINUTE,
    updateTime: NOW - MINUTE,
    finishTime: null,
    workerId: null,
    leaseExpireTime: null,
    deliveries: 0,
    lastError: null,
    resultJson: null,
    progressJson: null,
    traceContext: null,
    leaseTokenHash: null,
    leaseDurationMs: null,
    idempotencyKey: null,
    requestHash: null,
    heartbeatEventTime: null,
    progressEventTime: null,
    dependsOn: [],
    dependencyCounts: null,
    dependencyPolicy: null,
    hasDependents: false,
  };
  const byState: Record<JobState, Partial<StoredJob>> = {
    queued: {},
    running: {
      attempts: 1,
      deliveries: 1,
      workerId: "worker-1",
      leaseExpireTime: NOW + MINUTE,
      leaseDurationMs: 2 * MINUTE,
      leaseTokenHash: TOKEN_HASH,
    },
    retry: { attempts: 1, deliveries: 1, lastError: "smtp timeout" },
    completed: { attempts: 1, deliveries: 1, finishTime: NOW - MINUTE, resultJson: '"ok"' },
    dead: { attempts: 3, deliveries: 3, finishTime: NOW - MINUTE, lastError: "boom" },
    cancelled: { finishTime: NOW - MINUTE },
    waiting: {
      dependsOn: ["019ad5a2-7b3c-7def-8123-000000000001"],
      dependencyCounts: { total: 1, completed: 0, failed: 0 },
      dependencyPolicy: "wait",
    },
  };
  return Object.freeze({ ...base, ...byState[state], ...patch });
}

type Action = (job: StoredJob) => machine.Transition;

const ACTIONS = {
  claim: (job) => machine.claim(job, NOW, { workerId: "worker-2", leaseDurationMs: MINUTE, tokenHash: hashLeaseToken("new") }),
  heartbeat: (job) => machine.heartbeat(job, TOKEN, NOW),
  "heartbeat with progress": (job) => machine.heartbeat(job, TOKEN, NOW, undefined, '{"done":3,"of":10}'),
  complete: (job) => machine.complete(job, TOKEN, NOW, '{"ok":true}'),
  fail: (job) => machine.fail(job, TOKEN, NOW, { error: "smtp timeout", permanent: false }),
  "fail permanent": (job) => machine.fail(job, TOKEN, NOW, { error: "bad input", permanent: true }),
  release: (job) => machine.release(job, TOKEN, NOW),
  snooze: (job) => machine.snooze(job, TOKEN, NOW, 30_000),
  "expire lease": (job) => machine.expireLease(job, NOW),
  redrive: (job) => machine.redrive(job, NOW),
  cancel: (job) => machine.cancel(job, NOW, "no longer needed"),
  "dependencies met": (job) => machine.dependenciesMet(job, NOW),
} satisfies Record<string, Action>;

type ActionName = keyof typeof ACTIONS;

/**
 * What each action does to a job in each state, as stored by jobIn():
 * "<next state> <events recorded>" or the refusal's code ("invariant" for a
 * call the store never makes: claim of an ineligible job, expiry of a lease
 * that has not expired).
 */
const TABLE: Record<JobState, Record<ActionName, string>> = {
  queued: {
    claim: "running claimed",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "cancelled cancelled",
    "dependencies met": "invariant",
  },
  running: {
    claim: "invariant",
    heartbeat: "running heartbeat",
    "heartbeat with progress": "running heartbeat+progress",
    complete: "completed completed",
    fail: "retry failed",
    "fail permanent": "dead dead_lettered",
    release: "queued released",
    snooze: "queued snoozed",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "NOT_CANCELLABLE",
    "dependencies met": "invariant",
  },
  retry: {
    claim: "running claimed",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "cancelled cancelled",
    "dependencies met": "invariant",
  },
  completed: {
    claim: "invariant",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "NOT_CANCELLABLE",
    "dependencies met": "invariant",
  },
  dead: {
    claim: "invariant",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "queued redriven",
    cancel: "NOT_CANCELLABLE",
    "dependencies met": "invariant",
  },
  cancelled: {
    claim: "invariant",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "NOT_CANCELLABLE",
    "dependencies met": "invariant",
  },
  waiting: {
    claim: "invariant",
    heartbeat: "LEASE_REJECTED",
    "heartbeat with progress": "LEASE_REJECTED",
    complete: "LEASE_REJECTED",
    fail: "LEASE_REJECTED",
    "fail permanent": "LEASE_REJECTED",
    release: "LEASE_REJECTED",
    snooze: "LEASE_REJECTED",
    "expire lease": "invariant",
    redrive: "NOT_DEAD",
    cancel: "cancelled cancelled",
    "dependencies met": "queued dependencies_met",
  },
};

/** The outcome of an action as the table writes it. */
function outcomeOf(action: Action, job: StoredJob): string {
  let t: machine.Transition;
  try {
    t = action(job);
  } catch (err) {
    if (err instanceof QueueError) return err.reason;
    if (err instanceof Error && err.message.startsWith("invariant:")) return "invariant";
    throw err;
  }
  const recorded = [...t.events, ...(t.unrecorded ?? [])].map((e) => e.kind);
  return `${t.job.state} ${recorded.join("+")}`;
}

describe("the state machine, every state against every action", () => {
  it("has an expected outcome for every pair", () => {
    expect(Object.keys(TABLE).sort()).toEqual([...JOB_STATES].sort());
    for (const row of Object.values(TABLE)) expect(Object.keys(row).sort()).toEqual(Object.keys(ACTIONS).sort());
  });

  const pairs = JOB_STATES.flatMap((state) =>
    (Object.keys(ACTIONS) as ActionName[]).map((action) => ({ state, action, expected: TABLE[state][action] })),
  );

  it.each(pairs)("$state + $action -> $expected", ({ state, action, expected }) => {
    expect(outcomeOf(ACTIONS[action], jobIn(state))).toBe(expected);
  });
});

describe("the state machine where the lease, the token, the budget or the schedule decide", () => {
  const expiredLease = { leaseExpireTime: NOW };
  const spent = { attempts: 3 };
  const cases: Array<{ given: string; job: StoredJob; action: ActionName; expected: string }> = [
    ...(["heartbeat", "heartbeat with progress", "complete", "fail", "fail permanent", "release", "snooze"] as const).flatMap((action) => [
      { given: "running, lease expired (now = expiry)", job: jobIn("running", expiredLease), action, expected: "LEASE_EXPIRED" },
      {
        given: "running, another lease's token",
        job: jobIn("running", { leaseTokenHash: hashLeaseToken("older") }),
        action,
        expected: "LEASE_REJECTED",
      },
      // After the sweep recovered an expired lease the hash stays, so the late worker learns why.
      {
        given: "retry after expiry, the lost lease's token",
        job: jobIn("retry", { leaseTokenHash: TOKEN_HASH }),
        action,
        expected: "LEASE_EXPIRED",
      },
      {
        given: "dead after expiry, the lost lease's token",
        job: jobIn("dead", { leaseTokenHash: TOKEN_HASH }),
        action,
        expected: "LEASE_EXPIRED",
      },
    ]),
    {
      given: "running, lease expired, budget left",
      job: jobIn("running", expiredLease),
      action: "expire lease",
      expected: "retry lease_expired",
    },
    {
      given: "running, lease expired, budget spent",
      job: jobIn("running", { ...expiredLease, ...spent }),
      action: "expire lease",
      expected: "dead lease_expired+dead_lettered",
    },
    { given: "running, budget spent", job: jobIn("running", spent), action: "fail", expected: "dead dead_lettered" },
    { given: "running, second attempt", job: jobIn("running", { attempts: 2 }), action: "release", expected: "retry released" },
    { given: "running, second attempt", job: jobIn("running", { attempts: 2 }), action: "snooze", expected: "queued snoozed" },
    { given: "running, budget spent", job: jobIn("running", spent), action: "snooze", expected: "queued snoozed" },
    { given: "queued, scheduled for later", job: jobIn("queued", { scheduleTime: NOW + 1 }), action: "claim", expected: "invariant" },
    { given: "retry, backoff not over", job: jobIn("retry", { scheduleTime: NOW + 1 }), action: "claim", expected: "invariant" },
    { given: "queued, scheduled for now", job: jobIn("queued", { scheduleTime: NOW }), action: "claim", expected: "running claimed" },
    {
      given: "running, heartbeat 10 s after the lease's stored one",
      job: jobIn("running", { heartbeatEventTime: NOW - 10_000 }),
      action: "heartbeat",
      expected: "running heartbeat",
    },
    {
      given: "running, progress 999 ms after the job's stored one",
      job: jobIn("running", { heartbeatEventTime: NOW - 10_000, progressEventTime: NOW - 999 }),
      action: "heartbeat with progress",
      expected: "running heartbeat+progress",
    },
  ];

  it.each(cases)("$given + $action -> $expected", ({ job, action, expected }) => {
    expect(outcomeOf(ACTIONS[action], job)).toBe(expected);
  });

  it("stores a heartbeat within the interval of the lease's last stored one only as unrecorded", () => {
    const t = machine.heartbeat(jobIn("running", { heartbeatEventTime: NOW - 10_000 }), TOKEN, NOW);
    expect(t.events).toEqual([]);
    expect(t.unrecorded?.map((e) => e.kind)).toEqual(["heartbeat"]);
    const stored = machine.heartbeat(jobIn("running", { heartbeatEventTime: NOW - machine.HEARTBEAT_EVENT_INTERVAL_MS }), TOKEN, NOW);
    expect(stored.events.map((e) => e.kind)).toEqual(["heartbeat"]);
  });
});

describe("the progress policy: at most one stored PROGRESS event per job per second", () => {
  const PROGRESS = '{"done":3,"of":10}';
  const kinds = (events: readonly { kind: string }[] | undefined) => (events ?? []).map((e) => e.kind);
  const cases: Array<{ given: string; patch: Partial<StoredJob>; stored: string[]; unrecorded: string[] }> = [
    { given: "the lease's first heartbeat, the job's first progress", patch: {}, stored: ["heartbeat", "progress"], unrecorded: [] },
    {
      given: "a heartbeat stored 10 s ago, no progress yet",
      patch: { heartbeatEventTime: NOW - 10_000 },
      stored: ["progress"],
      unrecorded: ["heartbeat"],
    },
    {
      given: "progress stored 999 ms ago",
      patch: { heartbeatEventTime: NOW - 10_000, progressEventTime: NOW - 999 },
      stored: [],
      unrecorded: ["heartbeat", "progress"],
    },
    {
      given: "progress stored exactly a second ago",
      patch: { heartbeatEventTime: NOW - 10_000, progressEventTime: NOW - machine.PROGRESS_EVENT_INTERVAL_MS },
      stored: ["progress"],
      unrecorded: ["heartbeat"],
    },
    {
      given: "progress stored 500 ms ago under an earlier lease (the policy is per job)",
      patch: { progressEventTime: NOW - 500 },
      stored: ["heartbeat"],
      unrecorded: ["progress"],
    },
  ];

  it.each(cases)("$given: stores $stored, leaves $unrecorded unrecorded", ({ patch, stored, unrecorded }) => {
    const t = machine.heartbeat(jobIn("running", patch), TOKEN, NOW, undefined, PROGRESS);
    expect(kinds(t.events)).toEqual(stored);
    expect(kinds(t.unrecorded)).toEqual(unrecorded);
    // Stored or not, the latest progress is what the job shows.
    expect(t.job.progressJson).toBe(PROGRESS);
    expect(t.job.progressEventTime).toBe(stored.includes("progress") ? NOW : (patch.progressEventTime ?? null));
  });

  it("a PROGRESS event carries the progress as its message and changes no state", () => {
    const [, progress] = machine.heartbeat(jobIn("running"), TOKEN, NOW, undefined, PROGRESS).events;
    expect(progress).toMatchObject({ kind: "progress", fromState: "running", toState: "running", message: PROGRESS, workerId: "worker-1" });
  });

  it("a heartbeat without progress keeps the progress reported before and records no PROGRESS event", () => {
    const t = machine.heartbeat(jobIn("running", { progressJson: '"half"', progressEventTime: NOW - 5_000 }), TOKEN, NOW);
    expect(t.job).toMatchObject({ progressJson: '"half"', progressEventTime: NOW - 5_000 });
    expect(kinds([...t.events, ...(t.unrecorded ?? [])])).toEqual(["heartbeat"]);
  });

  it("a refused heartbeat stores no progress", () => {
    expect(() => machine.heartbeat(jobIn("running", { leaseExpireTime: NOW }), TOKEN, NOW, undefined, PROGRESS)).toThrow(QueueError);
  });
});

describe("what a transition sets", () => {
  it("claim counts the attempt and the delivery and starts the lease", () => {
    const t = ACTIONS.claim(jobIn("retry"));
    expect(t.job).toMatchObject({ state: "running", attempts: 2, deliveries: 2, workerId: "worker-2", leaseExpireTime: NOW + MINUTE });
    expect(t.events[0]).toMatchObject({ fromState: "retry", toState: "running", attempt: 2, workerId: "worker-2" });
  });

  it("fail schedules the retry after the backoff, or after retry_delay", () => {
    expect(ACTIONS.fail(jobIn("running")).job.scheduleTime).toBe(NOW + 15_000);
    expect(machine.fail(jobIn("running", { attempts: 2 }), TOKEN, NOW, { error: "", permanent: false }).job.scheduleTime).toBe(
      NOW + 30_000,
    );
    expect(machine.fail(jobIn("running"), TOKEN, NOW, { error: "x", permanent: false, retryDelayMs: 5 }).job.scheduleTime).toBe(NOW + 5);
  });

  it("heartbeat without a duration extends by the claim's", () => {
    expect(ACTIONS.heartbeat(jobIn("running")).job.leaseExpireTime).toBe(NOW + 2 * MINUTE);
  });

  it("release refunds the attempt and makes the job eligible at once", () => {
    expect(ACTIONS.release(jobIn("running")).job).toMatchObject({
      state: "queued",
      attempts: 0,
      deliveries: 1,
      scheduleTime: NOW,
      leaseTokenHash: null,
    });
  });

  it("snooze refunds the attempt, ends the lease and makes the job eligible after the delay", () => {
    const t = ACTIONS.snooze(jobIn("running", { attempts: 2, deliveries: 2, progressJson: '"half"', lastError: "earlier" }));
    expect(t.job).toMatchObject({
      state: "queued",
      attempts: 1,
      deliveries: 2,
      scheduleTime: NOW + 30_000,
      workerId: null,
      leaseExpireTime: null,
      leaseTokenHash: null,
      finishTime: null,
      progressJson: '"half"',
      lastError: "earlier",
    });
    expect(t.events).toEqual([
      expect.objectContaining({
        kind: "snoozed",
        fromState: "running",
        toState: "queued",
        attempt: 1,
        workerId: "worker-1",
        message: null,
      }),
    ]);
  });

  it.each([
    { delayMs: 0, scheduleTime: NOW },
    { delayMs: 30 * 24 * 60 * MINUTE, scheduleTime: NOW + 30 * 24 * 60 * MINUTE },
  ])("snooze accepts a delay of $delayMs ms (the bounds of a submit's delay)", ({ delayMs, scheduleTime }) => {
    expect(machine.snooze(jobIn("running"), TOKEN, NOW, delayMs).job.scheduleTime).toBe(scheduleTime);
  });

  it.each([-1, 30 * 24 * 60 * MINUTE + 1, 0.5, Number.NaN])("snooze refuses a delay of %s ms as a broken invariant", (delayMs) => {
    expect(() => machine.snooze(jobIn("running"), TOKEN, NOW, delayMs)).toThrow(/^invariant:/);
  });

  it("redrive resets the budget; complete, dead-lettering and cancel set the finish time and end the lease", () => {
    expect(ACTIONS.redrive(jobIn("dead")).job).toMatchObject({ state: "queued", attempts: 0, finishTime: null, scheduleTime: NOW });
    for (const t of [ACTIONS.complete(jobIn("running")), ACTIONS["fail permanent"](jobIn("running")), ACTIONS.cancel(jobIn("queued"))]) {
      expect(t.job).toMatchObject({ finishTime: NOW, workerId: null, leaseExpireTime: null, leaseTokenHash: null });
    }
  });

  it("expiry keeps the lost lease's token hash", () => {
    expect(ACTIONS["expire lease"](jobIn("running", { leaseExpireTime: NOW })).job.leaseTokenHash).toEqual(TOKEN_HASH);
  });
});
