/**
 * The shipped alerts (deploy/prometheus/alerts.yaml) and dashboard
 * (deploy/grafana/leasequeue.json) read only metrics a real server exports:
 * a server does some work (submit, replay, expire a lease, complete, fail to
 * dead), its side port is scraped, and every metric name in every expression
 * must be among the series of that exposition.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { alertExpressions, dashboardExpressions } from "../helpers/deploy-expressions.js";
import { exportedSeriesNames, parseExposition } from "../helpers/exposition.js";
import { metricNamesIn, unknownMetricNames } from "../helpers/promql-metric-names.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/** Series Prometheus makes itself for every target, not exported by the server. */
const PROMETHEUS_SERIES = ["up"];

let server: TestServer;
let clock: ManualClock;
let exposition: string;

async function ok(method: string, body: unknown): Promise<any> {
  const res = await server.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/** One job through an expired lease to completion, one to DEAD, one replayed submit, one refused call. */
async function work(queue: string): Promise<void> {
  const submit = { queue, task: "dash.probe", idempotencyKey: "dash-1" };
  const { job } = await ok("Submit", submit);
  await ok("Submit", submit);
  await ok("Claim", { queue, workerId: "dash-worker", leaseDuration: "1s" });
  clock.advance(5_000);
  const again = await ok("Claim", { queue, workerId: "dash-worker", leaseDuration: "60s" });
  await ok("Complete", { jobId: job.id, leaseToken: again.leases[0].leaseToken });

  const doomed = (await ok("Submit", { queue, task: "dash.probe" })).job;
  const lease = await ok("Claim", { queue, workerId: "dash-worker" });
  expect(lease.leases[0].job.id).toBe(doomed.id);
  await ok("Fail", { jobId: doomed.id, leaseToken: lease.leases[0].leaseToken, error: "boom", permanent: true });
  expect((await server.call("GetJob", { jobId: "not-a-uuid" })).status).toBe(400);
}

beforeAll(async () => {
  clock = new ManualClock(Date.now());
  server = await startTestServer({}, { clock });
  await work("dash");
  const res = await fetch(`${server.metricsUrl}/metrics`);
  expect(res.status).toBe(200);
  exposition = await res.text();
}, 60_000);

afterAll(async () => {
  await server?.close();
});

describe("metric names in deploy/", () => {
  it("the scrape carries the series the work produced", () => {
    const names = new Set(parseExposition(exposition).map((s) => s.name));
    for (const name of [
      "leasequeue_jobs",
      "leasequeue_transitions_total",
      "leasequeue_lease_expirations_total",
      "leasequeue_rpc_duration_seconds_bucket",
      "leasequeue_store_write_failures_total",
      "leasequeue_store_writable",
    ]) {
      expect(names, name).toContain(name);
    }
  });

  it("every metric an alert reads is exported by the server", () => {
    const alerts = alertExpressions();
    expect(alerts.length).toBeGreaterThanOrEqual(6);
    const known = new Set([...exportedSeriesNames(exposition), ...PROMETHEUS_SERIES]);
    expect(unknownMetricNames(alerts, known)).toEqual([]);
  });

  it("every metric a dashboard query or variable reads is exported by the server", () => {
    const queries = dashboardExpressions();
    expect(queries.length).toBeGreaterThan(20);
    const known = new Set([...exportedSeriesNames(exposition), ...PROMETHEUS_SERIES]);
    expect(unknownMetricNames(queries, known)).toEqual([]);
  });

  it("the check fails for a metric the server does not export", () => {
    const known = new Set([...exportedSeriesNames(exposition), ...PROMETHEUS_SERIES]);
    const wrong = [
      { where: "misspelt", expr: 'sum by (queue) (leasequeue_job{state="dead"})' },
      { where: "histogram by family name", expr: "rate(leasequeue_rpc_duration_seconds[5m])" },
    ];
    expect(unknownMetricNames(wrong, known)).toEqual([
      { where: "misspelt", metric: "leasequeue_job" },
      { where: "histogram by family name", metric: "leasequeue_rpc_duration_seconds" },
    ]);
  });

  it("the dashboard shows every leasequeue_* metric the server exports", () => {
    const read = new Set(dashboardExpressions().flatMap((q) => metricNamesIn(q.expr)));
    const families = [...exposition.matchAll(/^# TYPE (leasequeue_\w+) (\w+)$/gm)].map(([, name, type]) =>
      type === "histogram" ? `${name}_bucket` : name,
    );
    expect(families.length).toBeGreaterThan(10);
    const missing = families.filter(
      (name) => !read.has(name) && !(name.endsWith("_bucket") && read.has(name.replace(/_bucket$/, "_count"))),
    );
    expect(missing, "leasequeue_* metrics with no dashboard panel").toEqual([]);
  });
});
