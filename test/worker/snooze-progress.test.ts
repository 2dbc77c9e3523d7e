/**
 * Snooze and progress in the worker SDK (docs/api.md "Snooze and progress"),
 * over the Work stream (gRPC) and over StreamClaims plus Acknowledge (Connect
 * over HTTP/1.1): a thrown SnoozeJob or ctx.snooze() puts the job back for
 * later with the attempt refunded; ctx.progress() rides the heartbeats, and
 * the last report goes ahead of the job's Complete.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, EventKind, JobState, SnoozeJob, valueToJson, type Worker } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { WORKER_TRANSPORTS } from "../helpers/worker-transports.js";
import { gate, workerEventLog, type WorkerEventLog } from "../helpers/worker-events.js";

const DAY = 24 * 60 * 60 * 1000;

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe("SnoozeJob", () => {
  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY, 30 * DAY + 1])("refuses a delay of %s ms", (delayMs) => {
    expect(() => new SnoozeJob(delayMs)).toThrow(RangeError);
  });

  it("takes 0 to 30 days, in whole milliseconds", () => {
    expect(new SnoozeJob(0).delayMs).toBe(0);
    expect(new SnoozeJob(30 * DAY).delayMs).toBe(30 * DAY);
    expect(new SnoozeJob(1.6)).toMatchObject({ delayMs: 2, name: "SnoozeJob" });
  });
});

describe.each(WORKER_TRANSPORTS)("over %s", (name, options) => {
  const queue = `sp-${name.replace(/[^A-Za-z0-9]/g, "")}`;
  let worker: Worker;
  let log: WorkerEventLog;
  /** Opened by the test once it has seen the first progress report. */
  const reported = gate();

  beforeAll(async () => {
    log = workerEventLog();
    worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, ...options }),
      queue,
      workerId: "w-snooze",
      concurrency: 4,
      // A long interval: every heartbeat seen here is one a progress report brought forward.
      leaseDuration: 60_000,
      heartbeatInterval: 30_000,
      onEvent: log.onEvent,
      async handler(job, ctx) {
        switch (job.task) {
          case "snooze-throw":
            // The first delivery snoozes; the next one completes.
            if (job.deliveries === 1) throw new SnoozeJob(60_000);
            return "ran";
          case "snooze-ctx":
            if (job.deliveries === 1) {
              try {
                ctx.snooze(0);
              } catch {
                // Swallowed by the handler's own error handling: the job is snoozed all the same.
              }
              return "ignored";
            }
            return "second";
          case "progress": {
            ctx.progress({ pct: 10 });
            await reported.promise;
            for (let pct = 11; pct <= 100; pct++) ctx.progress({ pct });
            return "done";
          }
          case "bad-progress": {
            const refusals: string[] = [];
            for (const value of ["x".repeat(5000), undefined, JSON.parse("[".repeat(33) + "]".repeat(33)) as unknown]) {
              try {
                ctx.progress(value as never);
              } catch (err) {
                refusals.push((err as Error).name);
              }
            }
            return refusals;
          }
          default:
            throw new Error(`unknown task ${job.task}`);
        }
      },
    });
    await log.waitFor("connected");
  });
  afterAll(async () => {
    await worker.close();
  });

  async function submit(task: string, extra: Record<string, unknown> = {}): Promise<string> {
    const { body } = await t.call("Submit", { queue, task, ...extra });
    return body.job.id as string;
  }

  it("snoozes on a thrown SnoozeJob: QUEUED after the delay, attempt refunded, SNOOZED recorded", async () => {
    const id = await submit("snooze-throw", { maxAttempts: 1 });
    const [event] = await log.waitFor("snoozed", 1, (e) => e.job.id === id);
    expect(event.delayMs).toBe(60_000);
    expect(event.job).toMatchObject({ state: JobState.QUEUED, attempts: 0 });
    const { job } = await t.client.getJob({ jobId: id });
    expect(job).toMatchObject({ state: JobState.QUEUED, attempts: 0, deliveries: 1 });
    expect(timestampMs(job!.scheduleTime!) - timestampMs(job!.updateTime!)).toBe(60_000);
    const { events } = await t.client.listJobEvents({ jobId: id });
    expect(events.map((e) => e.kind)).toEqual([EventKind.SUBMITTED, EventKind.CLAIMED, EventKind.SNOOZED]);
    expect(log.all("failed").filter((e) => e.job.id === id)).toEqual([]);
  });

  it("snoozes on ctx.snooze() even when the handler catches it, and the job runs again with its budget", async () => {
    const id = await submit("snooze-ctx", { maxAttempts: 1 });
    await log.waitFor("snoozed", 1, (e) => e.job.id === id);
    const [done] = await log.waitFor("completed", 1, (e) => e.job.id === id);
    expect(valueToJson(done.job.result)).toBe("second");
    const { job } = await t.client.getJob({ jobId: id });
    expect(job).toMatchObject({ state: JobState.COMPLETED, attempts: 1, deliveries: 2 });
  });

  it("sends progress with a heartbeat brought forward, and the last report ahead of the Complete", async () => {
    const id = await submit("progress");
    // The interval is 30 s: this heartbeat is the one the report brought forward.
    const [beat] = await log.waitFor("heartbeat", 1, (e) => e.job.id === id);
    expect(valueToJson(beat.job.progress)).toEqual({ pct: 10 });
    expect(valueToJson((await t.client.getJob({ jobId: id })).job!.progress)).toEqual({ pct: 10 });
    reported.open();
    await log.waitFor("completed", 1, (e) => e.job.id === id);
    const { job } = await t.client.getJob({ jobId: id });
    expect(job!.state).toBe(JobState.COMPLETED);
    // Ninety reports in one turn: coalesced, and the last one stored before the job completed.
    expect(valueToJson(job!.progress)).toEqual({ pct: 100 });
    const { events } = await t.client.listJobEvents({ jobId: id });
    const progress = events.filter((e) => e.kind === EventKind.PROGRESS).map((e) => JSON.parse(e.message) as unknown);
    expect(progress[0]).toEqual({ pct: 10 });
    expect(progress.length).toBeLessThanOrEqual(2);
    expect(events.at(-1)?.kind).toBe(EventKind.COMPLETED);
  });

  it("refuses progress the server would refuse, in the handler, without breaking the stream", async () => {
    const id = await submit("bad-progress");
    const [done] = await log.waitFor("completed", 1, (e) => e.job.id === id);
    expect(valueToJson(done.job.result)).toEqual(["RangeError", "TypeError", "RangeError"]);
    expect(log.all("disconnected")).toEqual([]);
    expect((await t.client.getJob({ jobId: id })).job!.progress).toBeUndefined();
  });
});
