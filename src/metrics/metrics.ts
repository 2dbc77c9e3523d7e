/**
 * Prometheus metrics (prom-client), on a registry of their own so several
 * servers can live in one process (tests). Job counts are read from the
 * database at scrape time, so they are right after a restart; transition
 * counters follow the store's committed events.
 */
import { Code } from "@connectrpc/connect";
import client from "prom-client";
import type { Clock } from "../domain/clock.js";
import { JOB_STATES } from "../domain/job.js";
import { hasGroupRules, type QueueLimit } from "../domain/queue-limits.js";
import { WRITE_FAILURE_CAUSES, type PrunedJobs, type QueueCounts, type Store } from "../store/store.js";

export interface Metrics {
  readonly registry: client.Registry;
  /** Records one finished RPC. */
  observeRpc(method: string, code: Code | undefined, seconds: number): void;
  idempotentReplay(queue: string): void;
  /** Counts jobs deleted by retention. */
  pruned(entries: PrunedJobs[]): void;
  /** Stops following the store. */
  close(): void;
}

/** Connect codes as Prometheus label values: "ok", "invalid_argument", ... */
export function codeLabel(code: Code | undefined): string {
  if (code === undefined) return "ok";
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

/** Default Node.js gauges whose names end in `_total` although they are not counters. */
const NON_COUNTER_TOTALS = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

export interface MetricsSources {
  /** Long-poll Claims currently parked waiting for work. */
  claimWaiters?: () => number;
  /** Open StreamClaims streams. */
  claimStreams?: () => number;
  /** WaitJob calls currently waiting for their job to end. */
  jobWaiters?: () => number;
  /** The WatchEvents feed: current subscribers, events sent and subscribers dropped (by reason) so far. */
  watchEvents?: () => { subscribers: number; eventsSent: number; dropped: Record<string, number> };
  /** Claims that a queue limit or group rule held back so far (`limit`: max_running, rate_limit, group_max_running, group_rate_limit or ordered), by queue. */
  limitedClaims?: () => ReadonlyArray<{ queue: string; limit: QueueLimit; claims: number }>;
}

export function createMetrics(store: Store, clock: Clock, sources: MetricsSources = {}): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  // prom-client exports these three gauges with a `_total` suffix, which
  // Prometheus reserves for counters (`promtool check metrics` rejects them).
  // Their per-type breakdowns stay (nodejs_active_handles{type}, ...): the
  // totals are `sum()` of those.
  for (const name of NON_COUNTER_TOTALS) registry.removeSingleMetric(name);

  // The job gauges and the paused gauge read the same counts: one store read per scrape, shared
  // by the collect() calls that run together while the registry renders.
  let scrapeCounts: Promise<QueueCounts[]> | undefined;
  const countsOfThisScrape = () => {
    if (scrapeCounts === undefined) {
      scrapeCounts = store.queueCounts();
      setImmediate(() => (scrapeCounts = undefined));
    }
    return scrapeCounts;
  };

  new client.Gauge({
    name: "leasequeue_jobs",
    help: "Jobs in the database by queue and state.",
    labelNames: ["queue", "state"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const q of await countsOfThisScrape()) {
        for (const state of JOB_STATES) this.set({ queue: q.queue, state }, q.counts[state]);
      }
    },
  });

  new client.Gauge({
    name: "leasequeue_oldest_pending_seconds",
    help: "Age of the longest-waiting eligible (queued or retry) job by queue; 0 when none waits.",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const now = clock.now();
      for (const q of await countsOfThisScrape()) {
        const age = q.oldestPendingSince === null ? 0 : Math.max(0, now - q.oldestPendingSince) / 1000;
        this.set({ queue: q.queue }, age);
      }
    },
  });

  new client.Gauge({
    name: "leasequeue_queue_paused",
    help: "1 while a queue is paused (PauseQueue: it hands out no leases), else 0; by queue.",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const q of await countsOfThisScrape()) this.set({ queue: q.queue }, q.paused ? 1 : 0);
    },
  });

  new client.Gauge({
    name: "leasequeue_clock_offset_seconds",
    help: "The database's clock minus this server's host clock, as last measured (PostgreSQL: the server runs on the database's clock; 0 on SQLite).",
    registers: [registry],
    collect() {
      this.set(store.clockOffsetMs() / 1000);
    },
  });

  // Queue limits (UpdateQueue): what each queue allows, beside what it runs and leases.
  new client.Gauge({
    name: "leasequeue_queue_max_running",
    help: "A queue's max_running limit (UpdateQueue): most of its jobs running at once; 0 when unlimited. By queue.",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const q of await countsOfThisScrape()) this.set({ queue: q.queue }, q.config.maxRunning);
    },
  });
  new client.Gauge({
    name: "leasequeue_queue_rate_limit_per_second",
    help: "A queue's rate limit (UpdateQueue: rate_limit leases per rate_period) as leases per second; 0 when unlimited. By queue.",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const q of await countsOfThisScrape()) this.set({ queue: q.queue }, q.config.rateLimit / (q.config.ratePeriodMs / 1000));
    },
  });

  // Group rules (docs/api.md "Groups"): how many groups wait, for the queues whose rules look at groups.
  // No per-group label: a queue may have any number of groups (ListGroups is the per-group view).
  new client.Gauge({
    name: "leasequeue_queue_groups",
    help:
      "Groups with pending (queued or retry) jobs, by queue; only for queues with group rules (UpdateQueue: " +
      "group_max_running, group_rate_limit, fair or ordered). Jobs without a group are not counted.",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const grouped = (await countsOfThisScrape()).filter((q) => hasGroupRules(q.config));
      const counts = await Promise.all(grouped.map((q) => store.countPendingGroups(q.queue)));
      grouped.forEach((q, i) => this.set({ queue: q.queue }, counts[i]));
    },
  });

  const gaugeOf = (name: string, help: string, read: (() => number) | undefined) => {
    if (read === undefined) return;
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  gaugeOf("leasequeue_claim_waiters", "Long-poll Claim calls currently waiting for work.", sources.claimWaiters);
  gaugeOf("leasequeue_claim_streams", "Open StreamClaims streams.", sources.claimStreams);
  gaugeOf("leasequeue_job_waiters", "WaitJob calls currently waiting for their job to end.", sources.jobWaiters);

  if (sources.watchEvents !== undefined) {
    const watch = sources.watchEvents;
    gaugeOf("leasequeue_watch_subscribers", "WatchEvents streams currently receiving events.", () => watch().subscribers);
    // The feed keeps the running totals; these counters report them at scrape time.
    new client.Counter({
      name: "leasequeue_watch_events_sent_total",
      help: "Events sent on WatchEvents streams (replayed and live).",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(watch().eventsSent);
      },
    });
    new client.Counter({
      name: "leasequeue_watch_subscribers_dropped_total",
      help:
        "WatchEvents streams ended by the server because the subscriber read too slowly, by reason " +
        "(buffer_full: too many events waiting to be sent; output_full: too many bytes unread in its connection).",
      labelNames: ["reason"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [reason, n] of Object.entries(watch().dropped)) this.inc({ reason }, n);
      },
    });
  }

  if (sources.limitedClaims !== undefined) {
    const limited = sources.limitedClaims;
    // Dispatch keeps the running totals (every lease path reports its claims' holds there).
    new client.Counter({
      name: "leasequeue_queue_limited_claims_total",
      help:
        "Claims that handed out fewer leases than asked although eligible jobs were left, because of a queue limit " +
        "(limit: max_running or rate_limit) or a group rule (group_max_running, group_rate_limit or ordered), by queue and limit. " +
        "Waiting claimers then wait for a lease to finish or the rate window to move.",
      labelNames: ["queue", "limit"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const { queue, limit, claims } of limited()) this.inc({ queue, limit }, claims);
      },
    });
  }

  const transitions = new client.Counter({
    name: "leasequeue_transitions_total",
    help: "Committed job transitions by queue and event kind.",
    labelNames: ["queue", "kind"] as const,
    registers: [registry],
  });
  const expirations = new client.Counter({
    name: "leasequeue_lease_expirations_total",
    help: "Leases recovered after expiring, by queue.",
    labelNames: ["queue"] as const,
    registers: [registry],
  });
  const replays = new client.Counter({
    name: "leasequeue_idempotent_replays_total",
    help: "Submits answered with an existing job for a repeated idempotency key, by queue.",
    labelNames: ["queue"] as const,
    registers: [registry],
  });
  const rpcDuration = new client.Histogram({
    name: "leasequeue_rpc_duration_seconds",
    help: "Time to answer an RPC (to the first response of a stream), by method and code.",
    labelNames: ["method", "code"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });

  const prunedJobs = new client.Counter({
    name: "leasequeue_pruned_jobs_total",
    help: "Finished jobs deleted with their events by retention (LEASEQUEUE_RETENTION, LEASEQUEUE_DEAD_RETENTION), by queue and state.",
    labelNames: ["queue", "state"] as const,
    registers: [registry],
  });

  const unsubscribe = store.onCommitted(({ events, unrecorded, external }) => {
    // Each server counts the transitions committed through it, so sums over servers count each once.
    if (external) return;
    for (const e of events) {
      transitions.inc({ queue: e.queue, kind: e.kind });
      if (e.kind === "lease_expired") expirations.inc({ queue: e.queue });
    }
    // Heartbeats the heartbeat policy did not store still happened.
    for (const e of unrecorded) transitions.inc({ queue: e.queue, kind: e.kind });
  });

  // Write health: what readiness follows, counted so an alert can name the cause.
  const writeFailures = new client.Counter({
    name: "leasequeue_store_write_failures_total",
    help: "Write transactions the database refused, by cause (disk_full, io_error, busy, readonly, file_lost, other).",
    labelNames: ["cause"] as const,
    registers: [registry],
  });
  for (const cause of WRITE_FAILURE_CAUSES) writeFailures.inc({ cause }, 0);
  const writable = new client.Gauge({
    name: "leasequeue_store_writable",
    help: "1 while the latest write transaction succeeded, 0 while writes fail (readiness says 503).",
    registers: [registry],
  });
  writable.set(1);
  const unsubscribeWrites = store.onWriteOutcome((outcome) => {
    if (!outcome.ok) writeFailures.inc({ cause: outcome.cause });
    writable.set(outcome.ok ? 1 : 0);
  });

  return {
    registry,
    observeRpc(method, code, seconds) {
      rpcDuration.observe({ method, code: codeLabel(code) }, seconds);
    },
    idempotentReplay(queue) {
      replays.inc({ queue });
    },
    pruned(entries) {
      for (const p of entries) prunedJobs.inc({ queue: p.queue, state: p.state }, p.jobs);
    },
    close() {
      unsubscribe();
      unsubscribeWrites();
    },
  };
}
