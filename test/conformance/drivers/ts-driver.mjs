// Conformance driver for the TypeScript SDK (src/worker, compiled to dist/
// by `npm run build`), run by test/conformance/. It registers the suite's
// tasks on a createWorker() configured from the environment, runs it until
// SIGTERM (then close(), saying "stopping" as it stops taking work, as the
// other SDKs' workers do), and prints one JSON line per worker event on
// stdout ({"event": ..., "job": ..., "code": ..., "message": ...}) plus a
// "run" line each time a handler starts (none of the per-job lines with
// LEASEQUEUE_DRIVER_QUIET=1). When the worker stops by itself (a refusal no
// retry can cure: `worker.closed` rejects) it prints an "ended" line with
// the error's code and message and exits 1. Without LEASEQUEUE_WORKER_ID the
// worker takes its default id.
import { setTimeout as sleep } from "node:timers/promises";
import { existsSync, readFileSync } from "node:fs";
import { createLeaseQueueClient, createWorker, JobState, PermanentJobError } from "../../../dist/src/worker/index.js";

const env = process.env;
// LEASEQUEUE_DRIVER_QUIET=1 (bench/sdks.mjs): no line per job, only the worker's own events.
const quiet = env.LEASEQUEUE_DRIVER_QUIET === "1";
const emit = (fields) => {
  if (quiet && fields.job) return;
  process.stdout.write(JSON.stringify(fields) + "\n");
};
const CODES = {
  1: "canceled",
  3: "invalid_argument",
  4: "deadline_exceeded",
  7: "permission_denied",
  12: "unimplemented",
  14: "unavailable",
  16: "unauthenticated",
};
const codeOf = (error) => (error?.code !== undefined ? (CODES[error.code] ?? String(error.code)) : "");
// A ConnectError's message without its "[code] " prefix, as the other SDKs report the server's message.
const messageOf = (error) => error?.rawMessage ?? error?.message ?? "";

function wait(seconds, signal) {
  return sleep(seconds * 1000, undefined, { signal }).catch(() => undefined);
}

const tasks = {
  echo: (job, ctx) => ({ echo: ctx.payload }),
  fail: (job, ctx) => {
    throw new Error(ctx.payload.message);
  },
  permanent: (job, ctx) => {
    throw new PermanentJobError(ctx.payload.message);
  },
  snooze: (job, ctx) => {
    if (job.deliveries === 1) ctx.snooze(ctx.payload.seconds * 1000);
    return { attempts: job.attempts, deliveries: job.deliveries };
  },
  // Reports `progress` (if given), then runs until the test creates `file`.
  hold: async (job, ctx) => {
    const progress = ctx.payload.progress ?? null;
    if (progress !== null) ctx.progress(progress);
    while (!existsSync(ctx.payload.file) && !ctx.signal.aborted) await wait(0.01, ctx.signal);
    return { reported: progress };
  },
  sleep: async (job, ctx) => {
    await wait(ctx.payload.seconds, ctx.signal);
    return { slept: ctx.payload.seconds };
  },
  noop: () => null,
  // Reports the dependencies it sees, and the `echo.n` of each result an "echo" dependency returned.
  deps: (job, ctx) => ({
    truncated: ctx.dependenciesTruncated,
    dependencies: ctx.dependencies.map((d) => ({ id: d.jobId, state: JobState[d.state], result: d.result, lastError: d.lastError })),
    decoded: ctx.dependencies.filter((d) => d.result !== null).map((d) => ctx.dependencyResult(d.jobId).echo.n),
  }),
};

const ca = env.LEASEQUEUE_CA_FILE ? readFileSync(env.LEASEQUEUE_CA_FILE) : undefined;
const worker = createWorker({
  client: createLeaseQueueClient({
    url: env.LEASEQUEUE_URL,
    token: env.LEASEQUEUE_TOKEN || undefined,
    nodeOptions: ca ? { ca } : undefined,
  }),
  queue: env.LEASEQUEUE_QUEUE,
  workerId: env.LEASEQUEUE_WORKER_ID || undefined,
  concurrency: Number(env.LEASEQUEUE_CONCURRENCY || 1),
  leaseDuration: Number(env.LEASEQUEUE_LEASE_SECONDS || 10) * 1000,
  shutdownTimeout: Number(env.LEASEQUEUE_DRAIN_SECONDS || 10) * 1000,
  reconnectBackoff: { initialMs: 100, maxMs: 1000 },
  handler: (job, ctx) => {
    emit({ event: "run", job: job.id, attempt: job.attempts });
    const task = tasks[job.task];
    if (task === undefined) throw new Error(`no handler for task ${job.task}`);
    return task(job, ctx);
  },
  onEvent: (e) => {
    const error = e.error;
    emit({ event: e.type, job: e.job?.id ?? "", code: codeOf(error), message: messageOf(error) });
  },
});

emit({ event: "ready", sdk: "typescript", pid: process.pid });
worker.closed.catch((error) => {
  emit({ event: "ended", code: codeOf(error), message: messageOf(error) });
  process.exit(1);
});
let closing;
const stop = () => {
  if (closing !== undefined) return;
  // close() stops taking work before it returns its promise.
  closing = worker.close().then(() => {
    emit({ event: "stopped" });
    emit({ event: "exit" });
    process.exit(0);
  });
  emit({ event: "stopping" });
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
