/**
 * An example request body for every RPC of the reference, as proto3 JSON,
 * with the ids the page last saw (known-ids.ts) where a call needs a job or
 * a lease. test/docs/examples.test.ts parses each one with the RPC's request
 * schema, so an example cannot name a field that does not exist.
 */
import type { KnownIds } from "./known-ids.js";

/** What a body holds before the page has seen a job or a lease. */
export const PLACEHOLDERS = {
  jobId: "JOB_ID_FROM_SUBMIT",
  leaseJobId: "JOB_ID_FROM_CLAIM",
  leaseToken: "LEASE_TOKEN_FROM_CLAIM",
} as const;

const QUEUE = "emails";
const WORKER = "docs-worker-1";

type Example = (ids: KnownIds) => unknown;

const job = (ids: KnownIds) => ({ jobId: ids.jobId ?? PLACEHOLDERS.jobId });
const lease = (ids: KnownIds) => ({
  jobId: ids.lease?.jobId ?? PLACEHOLDERS.leaseJobId,
  leaseToken: ids.lease?.leaseToken ?? PLACEHOLDERS.leaseToken,
});

/** By the method's full name (`leasequeue.v1.LeaseQueueService.Submit`). */
export const EXAMPLES: Readonly<Record<string, Example>> = {
  "leasequeue.v1.LeaseQueueService.Submit": () => ({ queue: QUEUE, task: "welcome.send", payload: { to: "ada@example.com" } }),
  "leasequeue.v1.LeaseQueueService.SubmitBatch": () => ({
    jobs: [
      { queue: QUEUE, task: "welcome.send", payload: { to: "grace@example.com" } },
      { queue: QUEUE, task: "welcome.send", payload: { to: "alan@example.com" }, priority: 10, delay: "30s" },
    ],
    view: "JOB_VIEW_BASIC",
  }),
  "leasequeue.v1.LeaseQueueService.Claim": () => ({ queue: QUEUE, workerId: WORKER, leaseDuration: "60s", maxJobs: 1 }),
  "leasequeue.v1.LeaseQueueService.StreamClaims": () => ({ queue: QUEUE, workerId: WORKER, leaseDuration: "60s", maxInFlight: 1 }),
  "leasequeue.v1.LeaseQueueService.Heartbeat": (ids) => ({ ...lease(ids), leaseDuration: "60s", progress: { sent: 40, of: 100 } }),
  "leasequeue.v1.LeaseQueueService.Complete": (ids) => ({ ...lease(ids), result: { sent: true } }),
  "leasequeue.v1.LeaseQueueService.Fail": (ids) => ({ ...lease(ids), error: "smtp: connection refused", retryDelay: "30s" }),
  "leasequeue.v1.LeaseQueueService.Release": (ids) => lease(ids),
  "leasequeue.v1.LeaseQueueService.Snooze": (ids) => ({ ...lease(ids), delay: "30s" }),
  "leasequeue.v1.LeaseQueueService.Redrive": (ids) => job(ids),
  "leasequeue.v1.LeaseQueueService.Cancel": (ids) => ({ ...job(ids), reason: "sent by mistake" }),
  "leasequeue.v1.LeaseQueueService.GetJob": (ids) => job(ids),
  "leasequeue.v1.LeaseQueueService.WaitJob": (ids) => ({ ...job(ids), timeout: "10s" }),
  "leasequeue.v1.LeaseQueueService.ListJobs": () => ({ queue: QUEUE, states: ["JOB_STATE_QUEUED", "JOB_STATE_RUNNING"], pageSize: 20 }),
  "leasequeue.v1.LeaseQueueService.ListJobEvents": (ids) => job(ids),
  "leasequeue.v1.LeaseQueueService.GetStats": () => ({}),
  "leasequeue.v1.LeaseQueueService.WatchEvents": () => ({ queue: QUEUE }),
  "leasequeue.v1.LeaseQueueService.Acknowledge": (ids) => ({ acks: [{ ...lease(ids), complete: { result: { sent: true } } }] }),
  "leasequeue.v1.LeaseQueueService.Work": () => ({ start: { queue: QUEUE, workerId: WORKER, leaseDuration: "60s", maxInFlight: 10 } }),
  "leasequeue.v1.LeaseQueueService.PauseQueue": () => ({ queue: QUEUE }),
  "leasequeue.v1.LeaseQueueService.ResumeQueue": () => ({ queue: QUEUE }),
  "leasequeue.v1.LeaseQueueService.RedriveAll": () => ({ queue: QUEUE, limit: 100 }),
  "leasequeue.v1.LeaseQueueService.PurgeQueue": () => ({ queue: QUEUE, confirm: QUEUE }),
  "leasequeue.v1.LeaseQueueService.CreateSchedule": () => ({
    schedule: {
      name: "weekly-digest",
      cron: "0 9 * * MON",
      timezone: "Europe/Berlin",
      template: { queue: QUEUE, task: "digest.send", payload: { edition: "weekly" } },
    },
  }),
  "leasequeue.v1.LeaseQueueService.ListSchedules": () => ({}),
  "leasequeue.v1.LeaseQueueService.DeleteSchedule": () => ({ name: "weekly-digest" }),
  "leasequeue.v1.LeaseQueueService.UpdateQueue": () => ({
    queue: QUEUE,
    config: { maxRunning: 5, rateLimit: 100, ratePeriod: "60s" },
    updateMask: "maxRunning,rateLimit,ratePeriod",
  }),
  "leasequeue.v1.LeaseQueueService.ListGroups": () => ({ queue: QUEUE, pageSize: 100 }),
  "leasequeue.v1.LeaseQueueService.GetQueueActivity": () => ({ queue: QUEUE, window: "3600s", step: "300s" }),
  "grpc.health.v1.Health.Check": () => ({ service: "leasequeue.v1.LeaseQueueService" }),
  "grpc.health.v1.Health.Watch": () => ({ service: "" }),
  "grpc.health.v1.Health.List": () => ({}),
};

/** The example body of a method as indented JSON text; `{}` for a method without one. */
export function exampleBody(fullName: string, ids: KnownIds): string {
  const example = EXAMPLES[fullName];
  return JSON.stringify(example === undefined ? {} : example(ids), null, 2);
}
