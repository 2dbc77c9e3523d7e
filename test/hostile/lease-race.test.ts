/**
 * Racing for leases: 32 claimers at once (16 long-polling Claim, 16 holding
 * StreamClaims; over gRPC and Connect binary) on a few hundred jobs with 1 s
 * leases, and a share of the claimers finishing late, after their lease ran
 * out. What must hold (docs/api.md "Semantics"): two claims never hold the same
 * job at once, no job is COMPLETED twice, and a late Complete is refused
 * (aborted LEASE_EXPIRED, or LEASE_REJECTED once the job was leased again)
 * rather than overwriting the newer lease's outcome.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { EventKind, LeaseQueueService, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { jsonToValue } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const JOBS = 300;
const CLAIMERS = 32;
const LEASE_MS = 1000;
/** A late claimer completes this long after the lease arrived: past its expiry, whatever the network did. */
const LATE_MS = LEASE_MS + 200;
/** Every LATE_EVERY-th lease a claimer gets is finished late. */
const LATE_EVERY = 6;
const QUEUE = "race";

let s: TestServer;
let clients: Client<typeof LeaseQueueService>[];

beforeAll(async () => {
  s = await startTestServer({}, { sweepIntervalMs: 100 });
  clients = [
    createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl })),
    createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl })),
    createClient(LeaseQueueService, createConnectTransport({ baseUrl: s.apiUrl, httpVersion: "2", useBinaryFormat: true })),
    createClient(LeaseQueueService, createConnectTransport({ baseUrl: s.apiUrl, httpVersion: "1.1", useBinaryFormat: true })),
  ];
});

afterAll(async () => {
  await s?.close();
});

interface Tally {
  accepted: Map<string, number>;
  lateRefusals: Map<string, number>;
  lateAccepted: string[];
  /** On-time Completes that still missed the lease (a very slow machine): legitimate, and counted. */
  onTimeRefusals: number;
  otherErrors: string[];
  leases: number;
}

function reasonOf(err: ConnectError): string | undefined {
  return err.findDetails(ErrorInfoSchema).find((d) => d.domain === "leasequeue")?.reason;
}

it(
  "32 claimers with 1 s leases, some completing late: no job completed twice, every late Complete refused",
  { timeout: 60_000 },
  async () => {
    const { results } = await s.client.submitBatch({
      jobs: Array.from({ length: JOBS }, (_, i) => ({ queue: QUEUE, task: "race", payload: jsonToValue({ i }), maxAttempts: 100 })),
    });
    expect(results).toHaveLength(JOBS);

    const tally: Tally = { accepted: new Map(), lateRefusals: new Map(), lateAccepted: [], onTimeRefusals: 0, otherErrors: [], leases: 0 };
    const stop = new AbortController();
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));

    async function finish(client: Client<typeof LeaseQueueService>, lease: Lease, late: boolean): Promise<void> {
      const jobId = lease.job!.id;
      if (late) await sleep(LATE_MS);
      try {
        await client.complete({ jobId, leaseToken: lease.leaseToken, result: jsonToValue({ by: "racer" }) });
        if (late) tally.lateAccepted.push(jobId);
        tally.accepted.set(jobId, (tally.accepted.get(jobId) ?? 0) + 1);
        if (tally.accepted.size === JOBS) resolveDone();
      } catch (e) {
        const err = ConnectError.from(e);
        const reason = reasonOf(err);
        const leaseGone = err.code === Code.Aborted && (reason === "LEASE_EXPIRED" || reason === "LEASE_REJECTED");
        if (late && leaseGone) {
          tally.lateRefusals.set(reason, (tally.lateRefusals.get(reason) ?? 0) + 1);
        } else if (leaseGone) {
          tally.onTimeRefusals++;
        } else {
          tally.otherErrors.push(`${late ? "late" : "on time"} ${jobId}: ${err.message}`);
        }
      }
    }

    const pending = new Set<Promise<void>>();
    function track(p: Promise<void>): void {
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }

    async function unaryClaimer(n: number): Promise<void> {
      const client = clients[n % clients.length];
      let got = 0;
      while (!stop.signal.aborted) {
        try {
          const { leases } = await client.claim(
            {
              queue: QUEUE,
              workerId: `claim-${n}`,
              leaseDuration: durationFromMs(LEASE_MS),
              maxJobs: 1 + (n % 4),
              wait: durationFromMs(500),
            },
            { signal: stop.signal },
          );
          for (const lease of leases) {
            tally.leases++;
            track(finish(client, lease, ++got % LATE_EVERY === 0));
          }
        } catch (e) {
          if (!stop.signal.aborted) tally.otherErrors.push(`claim-${n}: ${ConnectError.from(e).message}`);
        }
      }
    }

    async function streamClaimer(n: number): Promise<void> {
      const client = clients[n % clients.length];
      let got = 0;
      try {
        const stream = client.streamClaims(
          { queue: QUEUE, workerId: `stream-${n}`, leaseDuration: durationFromMs(LEASE_MS), maxInFlight: 1 + (n % 5) },
          { signal: stop.signal },
        );
        for await (const m of stream) {
          if (m.lease === undefined) continue;
          tally.leases++;
          track(finish(client, m.lease, ++got % LATE_EVERY === 0));
        }
      } catch (e) {
        if (!stop.signal.aborted) tally.otherErrors.push(`stream-${n}: ${ConnectError.from(e).message}`);
      }
    }

    // The server shares this process: its event-loop stalls explain on-time Completes that miss a 1 s lease.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const started = performance.now();
    const claimers = Array.from({ length: CLAIMERS }, (_, n) => (n % 2 === 0 ? unaryClaimer(n) : streamClaimer(n)));
    await done;
    stop.abort();
    await Promise.all(claimers);
    while (pending.size > 0) await Promise.all([...pending]);
    const seconds = (performance.now() - started) / 1000;
    loopDelay.disable();

    const twice = [...tally.accepted].filter(([, n]) => n > 1);
    const refused = [...tally.lateRefusals.values()].reduce((a, b) => a + b, 0);
    console.log(
      `lease race: ${JOBS} jobs, ${tally.leases} leases, ${refused} late Completes refused ` +
        `(${[...tally.lateRefusals].map(([r, n]) => `${r} ${n}`).join(", ")}), ${tally.onTimeRefusals} on-time Completes too slow, in ${seconds.toFixed(1)} s; ` +
        `longest event-loop stall ${(loopDelay.max / 1e6).toFixed(0)} ms`,
    );
    expect(tally.otherErrors).toEqual([]);
    expect(twice).toEqual([]);
    expect(tally.lateAccepted).toEqual([]);
    expect(tally.accepted.size).toBe(JOBS);
    expect(refused).toBeGreaterThan(0);
    expect(tally.leases).toBe(JOBS + refused + tally.onTimeRefusals);

    // The server's record agrees: each job completed once, and every claim
    // was closed (expired) before the next one.
    const stats = await s.client.getStats({});
    expect(stats.total).toMatchObject({ completed: BigInt(JOBS), running: 0n, queued: 0n, retry: 0n, dead: 0n });
    let expiries = 0;
    for (const { job } of results) {
      const kinds = (await s.client.listJobEvents({ jobId: job!.id })).events.map((e) => e.kind);
      expect(kinds.filter((k) => k === EventKind.COMPLETED)).toHaveLength(1);
      let holding = false;
      for (const k of kinds) {
        if (k === EventKind.CLAIMED) {
          expect(holding, `job ${job!.id} claimed while its lease was held: ${kinds.join(",")}`).toBe(false);
          holding = true;
        } else if (k === EventKind.LEASE_EXPIRED || k === EventKind.COMPLETED) {
          holding = false;
          if (k === EventKind.LEASE_EXPIRED) expiries++;
        }
      }
    }
    expect(expiries).toBe(refused + tally.onTimeRefusals);
  },
);
