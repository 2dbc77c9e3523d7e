/**
 * How bench client processes drive LeaseQueue, per scenario kind and API.
 *
 * DRIVERS maps a scenario kind ("unary", "batched") to the ways of running
 * it, most preferred first. Each driver lists the RPCs it calls;
 * `selectDriver` takes the first one whose RPCs the generated service
 * descriptor has, so a driver for the batched path (Work + acknowledgements,
 * docs/api.md "The batched path: Acknowledge and Work") added to the front of
 * `batched` is used as soon as the server's protos have it, and rows are
 * named after the driver that actually ran.
 *
 * A scenario may name its driver (`key`) instead of taking the first.
 *
 * A driver has:
 *   key                     names it, for a scenario that asks for it
 *   label                   what ran, for the table
 *   calls                   the RPCs it uses; it runs only if the descriptor has them all
 *   fields                  (optional) request fields it needs, as "RequestSchema.field"
 *   callsPerJob             the fewest calls a job costs it (the unary ceiling divides by this)
 *   storeDone               (optional) the run ends when the server counts every job completed, not
 *                           at the last completion a worker saw (its completions are answered late)
 *   produce(ctx)            submit jobs [from, to) of this producer; with ctx.groups > 0, job i is in
 *                           group `g<i mod groups>` (SubmitRequest.group_key)
 *   work(ctx)               take and finish jobs until ctx.signal aborts
 *   latency(ctx)            submit-to-lease samples on an idle worker
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { nowMs, sleep } from "./timing.mjs";

const LEASE_DURATION = { seconds: 60n };

/** The `i` of a bench job's payload {"i": n}, read without a JSON round trip. */
export function payloadIndex(job) {
  const v = job.payload?.kind?.case === "structValue" ? job.payload.kind.value.fields.i : undefined;
  if (v?.kind?.case !== "numberValue") throw new Error(`job ${job.id} has no payload {"i": n}`);
  return v.kind.value;
}

/** Groups: job i in `g<i mod groups>`, so that consecutive jobs are in different groups; 0: no group. */
export function groupKeyOf(i, groups) {
  return groups > 0 ? `g${i % groups}` : "";
}

/** The rest of a job's payload with --payload=order: an order of about 700 bytes of JSON, as a shop's job might carry. */
export const ORDER = {
  customer: { id: 48213, email: "someone@example.com", name: "Some One", roles: ["buyer", "newsletter"] },
  items: Array.from({ length: 8 }, (_, k) => ({ sku: `SKU-${1000 + k}`, qty: k + 1, price: 19.99 + k, tags: ["gift", "fragile"] })),
  note: "Please leave the parcel with the neighbour at number 12 if nobody answers.",
  flags: { express: true, gift: false },
};

function submitRequest(queue, i, groups = 0, payload = "small") {
  const value = payload === "order" ? { i, ...ORDER } : { i };
  return { queue, task: "bench", payload: fromJson(ValueSchema, value), groupKey: groupKeyOf(i, groups) };
}

function aborted(err, signal) {
  return signal.aborted || err?.name === "AbortError" || err?.code === 1; // Code.Canceled
}

/** One Submit per job, awaited in turn: a producer that has one job at a time. */
async function submitEach({ client, queue, from, to, groups = 0, payload = "small" }) {
  let first = null;
  for (let i = from; i < to; i++) {
    const t = nowMs();
    first ??= t;
    await client.submit(submitRequest(queue, i, groups, payload));
  }
  return { first, last: nowMs(), submitted: to - from, calls: to - from };
}

/** SubmitBatch of `batchSize` jobs per call, awaited in turn; asks for JOB_VIEW_BASIC when the request has `view`. */
async function submitBatches({ client, queue, from, to, batchSize, schemas, groups = 0, payload = "small" }) {
  const basicView = schemas.SubmitBatchRequestSchema.field.view !== undefined ? { view: 2 /* JOB_VIEW_BASIC */ } : {};
  let first = null;
  let calls = 0;
  for (let i = from; i < to; i += batchSize) {
    const jobs = [];
    for (let j = i; j < Math.min(to, i + batchSize); j++) jobs.push(submitRequest(queue, j, groups, payload));
    const t = nowMs();
    first ??= t;
    const res = await client.submitBatch({ jobs, ...basicView });
    if (res.results.length !== jobs.length) throw new Error(`SubmitBatch answered ${res.results.length} results for ${jobs.length} jobs`);
    calls++;
  }
  return { first, last: nowMs(), submitted: to - from, calls };
}

/** `slots` loops of long-poll Claim (max_jobs 1, wait 5 s) then Complete. */
async function claimCompleteLoops({ client, queue, workerId, slots, signal, onCompleted, onReady }) {
  onReady();
  const loop = async (slot) => {
    while (!signal.aborted) {
      let res;
      try {
        res = await client.claim(
          { queue, workerId: `${workerId}-${slot}`, leaseDuration: LEASE_DURATION, maxJobs: 1, wait: { seconds: 5n } },
          { signal },
        );
      } catch (err) {
        if (aborted(err, signal)) return;
        throw err;
      }
      for (const lease of res.leases) {
        const i = payloadIndex(lease.job);
        await client.complete({ jobId: lease.job.id, leaseToken: lease.leaseToken });
        onCompleted(i, nowMs());
      }
    }
  };
  await Promise.all(Array.from({ length: slots }, (_, s) => loop(s)));
}

/**
 * `slots` loops of long-poll Claim (max_jobs 1, wait 5 s), each carrying the
 * Complete of the job the previous one leased (docs/api.md "Claim with
 * acks"): with Submit, two calls per job. The server commits the Complete
 * before the Claim waits, but its result comes back only with the next
 * lease (or at the end of the wait), so a job counts as handled when its
 * lease arrives (the handler does nothing) and the run ends when the server
 * reports every job completed (the driver's `storeDone`).
 */
async function claimWithAcksLoops({ client, queue, workerId, slots, signal, onCompleted, onReady }) {
  onReady();
  const loop = async (slot) => {
    let acks = [];
    while (!signal.aborted) {
      let res;
      try {
        res = await client.claim(
          { queue, workerId: `${workerId}-${slot}`, leaseDuration: LEASE_DURATION, maxJobs: 1, wait: { seconds: 5n }, acks },
          { signal },
        );
      } catch (err) {
        if (aborted(err, signal)) return;
        throw err;
      }
      if (res.results.length !== acks.length) throw new Error(`Claim answered ${res.results.length} results for ${acks.length} acks`);
      for (const r of res.results) {
        if ((r.status?.code ?? 0) !== 0) throw new Error(`acknowledgement of ${r.jobId} refused: ${r.status.message}`);
      }
      acks = res.leases.map((l) => ({ jobId: l.job.id, leaseToken: l.leaseToken, outcome: { case: "complete", value: {} } }));
      const at = nowMs();
      for (const l of res.leases) onCompleted(payloadIndex(l.job), at);
    }
  };
  await Promise.all(Array.from({ length: slots }, (_, s) => loop(s)));
}

/** One StreamClaims (max_in_flight) per worker process; each lease is completed with its own Complete as soon as it arrives. */
async function streamClaimsCompleteEach({ client, queue, workerId, maxInFlight, signal, onCompleted, onReady }) {
  const pending = new Set();
  let failure;
  try {
    for await (const msg of client.streamClaims({ queue, workerId, leaseDuration: LEASE_DURATION, maxInFlight }, { signal })) {
      if (msg.lease === undefined) {
        onReady(); // the first message is a keepalive: the stream is registered
        continue;
      }
      const { job, leaseToken } = msg.lease;
      const i = payloadIndex(job);
      const p = client.complete({ jobId: job.id, leaseToken }).then(
        () => onCompleted(i, nowMs()),
        (err) => {
          failure ??= err;
        },
      );
      pending.add(p);
      p.finally(() => pending.delete(p));
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows, as is, what the driver failed with
      if (failure !== undefined) throw failure;
    }
  } catch (err) {
    if (!aborted(err, signal)) throw err;
  }
  await Promise.all(pending);
  // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows, as is, what the driver failed with
  if (failure !== undefined && !aborted(failure, signal)) throw failure;
}

/**
 * Submit-to-lease on an idle StreamClaims stream (max_in_flight 1): Submit
 * one job, time until its lease arrives on the stream, Complete it, next.
 * Producer and worker use separate connections.
 */
async function streamLatency({ producer, worker, queue, samples, warmup }) {
  const abort = new AbortController();
  const stream = worker
    .streamClaims({ queue, workerId: "latency", maxInFlight: 1, leaseDuration: LEASE_DURATION }, { signal: abort.signal })
    [Symbol.asyncIterator]();
  try {
    return await sampleIdleStream({
      producer,
      queue,
      samples,
      warmup,
      stream,
      leaseOf: (message) => message.lease,
      finish: (lease) => worker.complete({ jobId: lease.job.id, leaseToken: lease.leaseToken }),
    });
  } finally {
    abort.abort();
    await stream.return?.().catch(() => {});
  }
}

/**
 * The submit-to-lease loop of an idle stream (StreamClaims or Work): wait
 * for the stream's first (empty) message, then submit one job at a time and
 * time Submit start -> its lease on the stream; `finish` acknowledges it.
 */
async function sampleIdleStream({ producer, queue, samples, warmup, stream, leaseOf, finish }) {
  const nextLease = async () => {
    for (;;) {
      const { value, done } = await stream.next();
      if (done) throw new Error("the stream ended");
      const lease = leaseOf(value);
      if (lease !== undefined) return lease;
    }
  };
  const first = await stream.next(); // empty: registered and idle
  if (first.done) throw new Error("the stream ended at once");
  const out = [];
  for (let n = 0; n < warmup + samples; n++) {
    const t0 = nowMs();
    const leased = nextLease().then((lease) => ({ lease, at: nowMs() }));
    const { job } = await producer.submit(submitRequest(queue, n));
    const { lease, at } = await leased;
    if (lease.job.id !== job.id) throw new Error("the idle stream leased a different job");
    if (n >= warmup) out.push(at - t0);
    await finish(lease);
  }
  return out;
}

/**
 * Submit-to-lease through an idle long-poll Claim (wait 10 s): the Claim is
 * sent first and given 20 ms to park on the server, then the job is
 * submitted; the sample is Submit start -> Claim response. Each lease is
 * completed with Complete, or (`carryAcks`) by the next sample's Claim, which
 * applies it before it parks.
 */
async function longPollLatency({ producer, worker, queue, samples, warmup, carryAcks = false }) {
  const out = [];
  let acks = [];
  for (let n = 0; n < warmup + samples; n++) {
    const claimed = worker
      .claim({ queue, workerId: "latency", leaseDuration: LEASE_DURATION, maxJobs: 1, wait: { seconds: 10n }, acks })
      .then((res) => ({ res, at: nowMs() }));
    await sleep(20);
    const t0 = nowMs();
    const { job } = await producer.submit(submitRequest(queue, n));
    const { res, at } = await claimed;
    if (res.leases.length !== 1 || res.leases[0].job.id !== job.id) throw new Error("the long-poll did not lease the submitted job");
    if (res.results.some((r) => (r.status?.code ?? 0) !== 0)) throw new Error("the long-poll refused the previous job's Complete");
    if (n >= warmup) out.push(at - t0);
    const complete = { jobId: job.id, leaseToken: res.leases[0].leaseToken };
    if (carryAcks) acks = [{ ...complete, outcome: { case: "complete", value: {} } }];
    else await worker.complete(complete);
  }
  if (acks.length > 0) await worker.acknowledge({ acks });
  return out;
}

/**
 * One Work stream (max_in_flight) per worker process: leases arrive many per
 * message; every lease is completed at once, and the completions of one
 * turn of the event loop go up together in one WorkRequest (the batching an
 * SDK does within about a millisecond).
 */
async function workStreamBatchedAcks({ client, queue, workerId, maxInFlight, signal, onCompleted, onReady }) {
  const pending = [];
  const indexOf = new Map();
  let wake;
  let scheduled = false;
  async function* requests() {
    yield { start: { queue, workerId, leaseDuration: LEASE_DURATION, maxInFlight } };
    while (!signal.aborted) {
      if (pending.length > 0) {
        yield { acks: pending.splice(0, 1000) };
        continue;
      }
      await new Promise((resolve) => (wake = resolve));
    }
  }
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  let ready = false;
  try {
    for await (const msg of client.work(requests(), { signal })) {
      if (!ready) {
        ready = true;
        onReady(); // the first message is empty: the stream is registered
      }
      for (const lease of msg.leases) {
        indexOf.set(lease.job.id, payloadIndex(lease.job));
        pending.push({ jobId: lease.job.id, leaseToken: lease.leaseToken, outcome: { case: "complete", value: {} } });
      }
      for (const r of msg.results) {
        if ((r.status?.code ?? 0) !== 0) throw new Error(`acknowledgement of ${r.jobId} refused: ${r.status.message}`);
        onCompleted(indexOf.get(r.jobId), nowMs());
        indexOf.delete(r.jobId);
      }
      if (pending.length > 0 && !scheduled) {
        scheduled = true;
        setImmediate(() => {
          scheduled = false;
          wake?.();
        });
      }
    }
  } catch (err) {
    if (!aborted(err, signal)) throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** Submit-to-lease on an idle Work stream (max_in_flight 1), acknowledged on the same stream. */
async function workLatency({ producer, worker, queue, samples, warmup }) {
  const abort = new AbortController();
  const acks = [];
  let wake;
  async function* requests() {
    yield { start: { queue, workerId: "latency", maxInFlight: 1, leaseDuration: LEASE_DURATION } };
    while (!abort.signal.aborted) {
      if (acks.length > 0) {
        yield { acks: acks.splice(0) };
        continue;
      }
      await new Promise((resolve) => (wake = resolve));
    }
  }
  const stream = worker.work(requests(), { signal: abort.signal })[Symbol.asyncIterator]();
  try {
    return await sampleIdleStream({
      producer,
      queue,
      samples,
      warmup,
      stream,
      leaseOf: (message) => message.leases[0],
      finish: (lease) => {
        acks.push({ jobId: lease.job.id, leaseToken: lease.leaseToken, outcome: { case: "complete", value: {} } });
        wake?.();
      },
    });
  } finally {
    abort.abort();
    wake?.();
    await stream.return?.().catch(() => {});
  }
}

export const DRIVERS = {
  unary: [
    {
      key: "submit+claim+complete",
      label: "Submit; Claim(wait) + Complete",
      latencyLabel: "idle long-poll Claim",
      calls: ["submit", "claim", "complete"],
      callsPerJob: 3,
      produce: submitEach,
      work: claimCompleteLoops,
      latency: longPollLatency,
    },
    {
      key: "submit+claim-with-acks",
      label: "Submit; Claim(wait, acks: the previous job's Complete); end when GetStats counts every job completed",
      latencyLabel: "idle long-poll Claim carrying the previous Complete",
      calls: ["submit", "claim"],
      fields: ["ClaimRequestSchema.acks"],
      callsPerJob: 2,
      storeDone: true,
      produce: submitEach,
      work: claimWithAcksLoops,
      latency: (ctx) => longPollLatency({ ...ctx, carryAcks: true }),
    },
  ],
  batched: [
    {
      key: "submitbatch+work",
      label: "SubmitBatch(100, BASIC); Work(64) with batched acks",
      latencyLabel: "idle Work stream",
      calls: ["submitBatch", "work"],
      produce: submitBatches,
      work: workStreamBatchedAcks,
      latency: workLatency,
    },
    {
      key: "submitbatch+streamclaims+complete",
      label: "SubmitBatch(100); StreamClaims(64) + Complete",
      latencyLabel: "idle StreamClaims",
      calls: ["submitBatch", "streamClaims", "complete"],
      produce: submitBatches,
      work: streamClaimsCompleteEach,
      latency: streamLatency,
    },
  ],
};

/**
 * The driver for a scenario kind: the one named `key`, or else the first in
 * DRIVERS[kind] whose RPCs (and fields) the descriptor has. Also reports the section-A RPCs that the descriptor has
 * but no listed driver uses, so a run says what it did not measure.
 */
export function selectDriver(kind, service, schemas, key) {
  const candidates = DRIVERS[kind];
  if (candidates === undefined) throw new Error(`no drivers for scenario kind ${kind}`);
  const runs = (d) =>
    d.calls.every((m) => service.method[m] !== undefined) &&
    (d.fields ?? []).every((f) => {
      const [schema, field] = f.split(".");
      return schemas[schema]?.field[field] !== undefined;
    });
  let driver;
  if (key !== undefined) {
    driver = candidates.find((d) => d.key === key);
    if (driver === undefined) throw new Error(`no ${kind} driver ${key}`);
    if (!runs(driver)) throw new Error(`the service descriptor lacks what the ${key} driver needs`);
  } else {
    driver = candidates.find(runs);
    if (driver === undefined) throw new Error(`the service descriptor lacks the RPCs of every ${kind} driver`);
  }
  const unused =
    kind === "batched" ? ["work", "acknowledge"].filter((m) => service.method[m] !== undefined && !driver.calls.includes(m)) : [];
  const view =
    kind === "batched" && schemas.SubmitBatchRequestSchema.field.view !== undefined ? "JOB_VIEW_BASIC" : "full jobs (no JobView yet)";
  return { driver, unusedBatchedRpcs: unused, submitBatchView: view };
}
