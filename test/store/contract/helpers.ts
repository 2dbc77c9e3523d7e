/**
 * What the areas of the store contract share: the harness an engine's
 * factory hands the suite, the jobs and schedules the tests submit, the
 * recorder of what a store announces, and the store, clock and harness of
 * the test that runs, with the calls most tests begin with.
 */
import { afterEach, beforeEach, expect } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { QueueError } from "../../../src/domain/errors.js";
import type { ScheduleSpec } from "../../../src/domain/schedule.js";
import type { NewJob } from "../../../src/domain/submission.js";
import type { CommittedChange, Store } from "../../../src/store/store.js";
import { claimLeases } from "../../helpers/store.js";

export interface StoreHarness {
  store: Store;
  /**
   * Opens another store instance on the same database, with the same clock
   * (as a second server would); dispose closes it too.
   */
  openInstance(): Promise<Store>;
  /** Releases everything the stores used (files, schemas). */
  dispose(): Promise<void>;
}

export type StoreFactory = (clock: ManualClock) => Promise<StoreHarness>;

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export function newJob(overrides: Partial<NewJob> = {}): NewJob {
  return {
    queue: "billing",
    task: "invoice.generate",
    groupKey: "",
    payloadJson: '{"invoiceId":"inv_481"}',
    priority: 0,
    maxAttempts: 3,
    retryBaseDelayMs: 15 * SECOND,
    schedule: null,
    idempotencyKey: null,
    traceContext: null,
    ...overrides,
  };
}

/** A schedule as CreateSchedule would pass it after validation: nightly at 03:00 UTC into "reports". */
export function newSchedule(overrides: Partial<ScheduleSpec> = {}): ScheduleSpec {
  return {
    name: "nightly",
    recurrence: { cron: "0 3 * * *" },
    timezone: "UTC",
    template: {
      queue: "reports",
      task: "report.build",
      groupKey: "",
      payloadJson: '{"kind":"daily"}',
      priority: 0,
      maxAttempts: 3,
      retryBaseDelayMs: 15 * SECOND,
      delayMs: null,
    },
    paused: false,
    ...overrides,
  };
}

/**
 * Everything one store instance announces, with ways to wait (on the
 * announcements themselves, never on a timer) until it has announced a
 * sequence or something else.
 */
export function recordAnnouncements(store: Store) {
  const changes: CommittedChange[] = [];
  const waiters = new Set<() => boolean>();
  const off = store.onCommitted((change) => {
    changes.push(change);
    for (const settled of [...waiters]) if (settled()) waiters.delete(settled);
  });
  const until = (done: () => boolean) =>
    new Promise<void>((resolve) => {
      const settled = () => (done() ? (resolve(), true) : false);
      if (!settled()) waiters.add(settled);
    });
  const events = () => changes.flatMap((c) => c.events.map((e) => ({ ...e, external: c.external })));
  return {
    changes,
    events,
    sequences: () => events().map((e) => e.sequence),
    /** Resolves once an event with this sequence or a larger one was announced. */
    through: (sequence: number) => until(() => events().some((e) => e.sequence >= sequence)),
    until,
    off,
  };
}

/** The QueueError a store call is refused with; fails the test if it is not refused. */
export async function refusal(promise: Promise<unknown>): Promise<QueueError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(QueueError);
    return err as QueueError;
  }
  throw new Error("expected the store to refuse");
}

/**
 * The test that runs: its clock, the harness the engine's factory made on
 * it and that harness's first store. Set before each test of a suite that
 * calls useContractStore; the areas import them (live bindings, so each
 * test sees its own).
 */
export let clock: ManualClock;
export let harness: StoreHarness;
export let store: Store;

/**
 * Gives each test of the enclosing suite a fresh store from `factory`, on
 * a manual clock at 2026-11-30 12:00 UTC, and disposes of it afterwards.
 */
export function useContractStore(factory: StoreFactory): void {
  beforeEach(async () => {
    clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
    harness = await factory(clock);
    store = harness.store;
  });
  afterEach(async () => {
    await harness.dispose();
  });
}

/** Submits one job (newJob with `overrides`) to the test's store. */
export async function submitOne(overrides: Partial<NewJob> = {}) {
  const [outcome] = await store.submit([newJob(overrides)]);
  return outcome.job;
}

/** Claims exactly one lease from the test's store. */
export async function claimOne(queue = "billing", leaseDurationMs = MINUTE, workerId = "worker-1") {
  const leases = await claimLeases(store, { queue, workerId, leaseDurationMs, maxJobs: 1 });
  expect(leases).toHaveLength(1);
  return leases[0];
}

/** A job's events as `kind:from>to`. */
export async function kinds(jobId: string) {
  return (await store.listJobEvents(jobId)).map((e) => `${e.kind}:${e.fromState ?? "-"}>${e.toState}`);
}
