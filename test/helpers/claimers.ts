/**
 * Claimers for the end-to-end tests of several servers on one database
 * (test/e2e/postgres-*.test.ts): the ways a worker takes leases and finishes
 * them, each completing every lease it gets until the run's signal aborts.
 *
 * - a Work stream acknowledging the leases of each response on the stream
 *   (docs/api.md "The batched path: Acknowledge and Work");
 * - a StreamClaims stream whose leases that arrive together are acknowledged
 *   together, one Acknowledge at a time (docs/api.md "StreamClaims: pushed
 *   leases");
 * - a long-poll Claim of up to 20 jobs, acknowledged in one Acknowledge;
 * - a long-poll Claim of up to 5 jobs, each completed by a Complete.
 *
 * startClaimers spreads `count` of them over the clients: claimer n talks to
 * server n % clients.length and is of kind n % 4, so with three servers 12
 * claimers are enough for every kind on every server.
 */
import { setMaxListeners } from "node:events";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { expect } from "vitest";
import {
  AcknowledgementSchema,
  WorkRequestSchema,
  type LeaseQueueService,
  type Lease,
  type WorkRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { requestQueue } from "./request-queue.js";

export type LeaseQueueClient = Client<typeof LeaseQueueService>;

export const seconds = (n: number) => ({ seconds: BigInt(n) });
export const number = (n: number) => ({ kind: { case: "numberValue" as const, value: n } });
export const complete = (lease: Lease): MessageInitShape<typeof AcknowledgementSchema> => ({
  jobId: lease.job!.id,
  leaseToken: lease.leaseToken,
  outcome: { case: "complete", value: {} },
});

/** True for the error a call ends with when the test itself aborted it. */
export function abortedBy(signal: AbortSignal, err: unknown): boolean {
  return signal.aborted && ConnectError.from(err).code === Code.Canceled;
}

/** A failure as one readable line: a wire error's code and message, or an Error's message. */
export function describeFailure(err: unknown): string {
  if (err instanceof ConnectError) return `${Code[err.code]}: ${err.rawMessage}`;
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}

/**
 * One run of claimers: `finished` ends them all; the first failure (a call
 * that failed, an acknowledgement not answered OK) is kept in `failures` and
 * aborts the run, so a test awaits its claimers and then reports it.
 */
export class ClaimRun {
  readonly #finished = new AbortController();
  readonly failures: unknown[] = [];

  constructor(listeners: number) {
    setMaxListeners(listeners, this.#finished.signal);
  }

  get signal(): AbortSignal {
    return this.#finished.signal;
  }

  finish(): void {
    this.#finished.abort();
  }

  /** Records a failure (not the error of a call this run aborted) and ends the run. */
  readonly fail = (err: unknown): void => {
    if (abortedBy(this.signal, err)) return;
    this.failures.push(err);
    this.finish();
  };
}

export interface ClaimerHooks {
  run: ClaimRun;
  queue: string;
  /** A lease reached the claimer `worker`, which talks to server `server`. */
  leased: (lease: Lease, worker: string, server: number) => void;
  /** The completion of a job was answered OK. */
  done: (jobId: string) => void;
}

/** Starts `count` claimers over `clients` (see the file comment); each settles when the run ends, never rejecting. */
export function startClaimers(clients: LeaseQueueClient[], count: number, hooks: ClaimerHooks): Promise<void>[] {
  const { run, queue, leased, done } = hooks;
  const { signal } = run;
  const claimer = (body: () => Promise<void>) => body().catch(run.fail);
  const acknowledge = async (client: LeaseQueueClient, leases: Lease[]) => {
    const { results } = await client.acknowledge({ acks: leases.map(complete) }, { signal });
    for (const r of results) {
      expect(r.status?.code ?? 0, r.status?.message).toBe(0);
      done(r.jobId);
    }
  };

  const workStream = (client: LeaseQueueClient, worker: string, server: number) =>
    claimer(async () => {
      const requests = requestQueue<WorkRequest>(signal);
      requests.push(create(WorkRequestSchema, { start: { queue, workerId: worker, leaseDuration: seconds(300), maxInFlight: 50 } }));
      for await (const res of client.work(requests.stream, { signal })) {
        for (const lease of res.leases) leased(lease, worker, server);
        if (res.leases.length > 0) requests.push(create(WorkRequestSchema, { acks: res.leases.map(complete) }));
        for (const r of res.results) {
          expect(r.status?.code ?? 0, r.status?.message).toBe(0);
          done(r.jobId);
        }
      }
    });
  const streamClaims = (client: LeaseQueueClient, worker: string, server: number) =>
    claimer(async () => {
      let batch: Lease[] = [];
      let flushing = Promise.resolve();
      const flush = () => {
        const leases = batch;
        batch = [];
        flushing = flushing.then(() => acknowledge(client, leases)).catch(run.fail);
      };
      const stream = client.streamClaims({ queue, workerId: worker, leaseDuration: seconds(300), maxInFlight: 20 }, { signal });
      for await (const res of stream) {
        if (res.lease === undefined) continue;
        leased(res.lease, worker, server);
        if (batch.push(res.lease) === 1) setImmediate(flush);
      }
      await flushing;
    });
  const claimLoop = (client: LeaseQueueClient, worker: string, server: number, maxJobs: number, batched: boolean) =>
    claimer(async () => {
      while (!signal.aborted) {
        const { leases } = await client.claim(
          { queue, workerId: worker, leaseDuration: seconds(300), maxJobs, wait: seconds(1) },
          { signal },
        );
        for (const lease of leases) leased(lease, worker, server);
        if (batched) {
          if (leases.length > 0) await acknowledge(client, leases);
          continue;
        }
        for (const lease of leases) {
          const { job } = await client.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken }, { signal });
          expect(job?.deliveries).toBe(1);
          done(lease.job!.id);
        }
      }
    });

  return Array.from({ length: count }, (_, n) => {
    const server = n % clients.length;
    const worker = `claimer-${n}-on-${server}`;
    const client = clients[server];
    switch (n % 4) {
      case 0:
        return workStream(client, worker, server);
      case 1:
        return streamClaims(client, worker, server);
      case 2:
        return claimLoop(client, worker, server, 20, true);
      default:
        return claimLoop(client, worker, server, 5, false);
    }
  });
}
