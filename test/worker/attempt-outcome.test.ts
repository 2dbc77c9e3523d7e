/**
 * What a handler's outcome does to its job: a returned value completes it
 * with that result, a thrown error fails the attempt with the error's
 * message, PermanentJobError dead-letters, RetryJobError sets the retry
 * delay.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createWorker,
  jsonToValue,
  JobState,
  PermanentJobError,
  RetryJobError,
  valueToJson,
  type Job,
  type Worker,
} from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog, type WorkerEventLog } from "../helpers/worker-events.js";

let t: TestServer;
let worker: Worker;
let log: WorkerEventLog;
let bigStarted = 0;
const bigTogether = gate();

beforeAll(async () => {
  t = await startTestServer();
  log = workerEventLog();
  worker = createWorker({
    url: t.apiUrl,
    queue: "outcomes",
    workerId: "w-outcomes",
    concurrency: 4,
    onEvent: log.onEvent,
    async handler(job, { payload }) {
      switch (job.task) {
        case "returns":
          return { echoed: payload };
        case "returns-nothing":
          return;
        case "throws":
          throw new Error("smtp timeout");
        case "permanent":
          throw new PermanentJobError("account deleted");
        case "retry-later":
          throw new RetryJobError("rate limited", { retryDelayMs: 120_000 });
        case "huge-result":
          return "x".repeat(70 * 1024);
        case "numbers-result":
          return Array.from({ length: 20_000 }, () => 0); // 40 KB of JSON, about 220 KB as protobuf
        case "big-result":
          // The four return in the same turn, so their Completes share one flush.
          if (++bigStarted === 4) bigTogether.open();
          await bigTogether.promise;
          return "y".repeat(60 * 1024);
        default:
          throw new Error(`unknown task ${job.task}`);
      }
    },
  });
  await log.waitFor("connected");
});

afterAll(async () => {
  await worker.close();
  await t.close();
});

/** Submits a job and waits for the worker's Complete or Fail of it. */
async function run(task: string, extra: Record<string, unknown> = {}): Promise<Job> {
  const { body } = await t.call("Submit", { queue: "outcomes", task, ...extra });
  const id = body.job.id;
  const done = await Promise.race([log.waitFor("completed", 1, (e) => e.job.id === id), log.waitFor("failed", 1, (e) => e.job.id === id)]);
  expect(done[0].job.id).toBe(id);
  return (await t.client.getJob({ jobId: id })).job!;
}

describe("a handler's outcome", () => {
  it("completes the job with the returned value as its result", async () => {
    const job = await run("returns", { payload: { invoiceId: "inv_1" } });
    expect(job.state).toBe(JobState.COMPLETED);
    expect(valueToJson(job.result)).toEqual({ echoed: { invoiceId: "inv_1" } });
  });

  it("completes the job without a result when the handler returns nothing", async () => {
    const job = await run("returns-nothing");
    expect(job.state).toBe(JobState.COMPLETED);
    expect(job.result).toBeUndefined();
  });

  it("fails the attempt with the thrown error's message and retries with backoff", async () => {
    const job = await run("throws", { retryBaseDelay: "60s" });
    expect(job).toMatchObject({ state: JobState.RETRY, attempts: 1, lastError: "smtp timeout" });
    const wait = timestampMs(job.scheduleTime!) - timestampMs(job.updateTime!);
    expect(wait).toBe(60_000);
  });

  it("dead-letters at once on PermanentJobError, attempts left or not", async () => {
    const job = await run("permanent", { maxAttempts: 5 });
    expect(job).toMatchObject({ state: JobState.DEAD, attempts: 1, maxAttempts: 5, lastError: "account deleted" });
  });

  it("retries after RetryJobError's delay instead of the backoff", async () => {
    const job = await run("retry-later", { retryBaseDelay: "1s" });
    expect(job).toMatchObject({ state: JobState.RETRY, lastError: "rate limited" });
    expect(timestampMs(job.scheduleTime!) - timestampMs(job.updateTime!)).toBe(120_000);
  });

  it("fails the job, rather than leaving it to expire, when the server refuses the result", async () => {
    const job = await run("huge-result");
    expect(job.state).toBe(JobState.RETRY);
    expect(job.lastError).toMatch(/refused the result.*65536/);
  });

  it("fails the job when the result is within 64 KiB of JSON but larger than a request once encoded, and the stream goes on", async () => {
    const job = await run("numbers-result");
    expect(job.state).toBe(JobState.RETRY);
    expect(job.lastError).toMatch(/refused the result.*encodes to \d+ bytes of protobuf/);
    expect(log.all("disconnected")).toEqual([]);
  });

  it("completes four 60 KiB results finishing together, in messages within the request limit", async () => {
    const res = await t.call("SubmitBatch", { jobs: [1, 2, 3, 4].map(() => ({ queue: "outcomes", task: "big-result" })) });
    const ids: string[] = res.body.results.map((r: { job: { id: string } }) => r.job.id);
    for (const id of ids) await log.waitFor("completed", 1, (e) => e.job.id === id);
    expect(log.all("disconnected")).toEqual([]);
    for (const id of ids) expect((await t.client.getJob({ jobId: id })).job!.state).toBe(JobState.COMPLETED);
  });

  it("accepts payloads built with jsonToValue from the SDK client", async () => {
    const { job } = await t.client.submit({ queue: "outcomes", task: "returns", payload: jsonToValue([1, "two", { three: null }]) });
    const [done] = await log.waitFor("completed", 1, (e) => e.job.id === job!.id);
    expect(valueToJson(done.job.result)).toMatchObject({ echoed: [1, "two", { three: null }] });
  });
});
