/**
 * The side port as Prometheus sees it: after real traffic, `/metrics` passes
 * `promtool check metrics` (the exposition format and Prometheus' naming lint)
 * and carries the series dashboards and alerts are written against. The API
 * port and the side port serve nothing of each other. The alerting rules and
 * dashboard of deploy/ pass promtool too.
 *
 * Debian package: prometheus (provides promtool).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { ManualClock } from "../../src/testing/index.js";
import { alertExpressions, dashboardExpressions } from "../helpers/deploy-expressions.js";
import { parseExposition } from "../helpers/exposition.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable, works } from "./tools.js";

const PROMTOOL = "promtool";
const available = await works(PROMTOOL, ["--version"]);
const skip = skipUnlessAvailable(available);

let server: TestServer;
let clock: ManualClock;

beforeAll(async () => {
  // A clock the test moves, so a lease can expire without waiting for it.
  clock = new ManualClock(Date.now());
  server = await startTestServer({}, { clock });
});

afterAll(async () => {
  await server?.close();
});

/** Connect JSON call that must succeed. */
async function ok(method: string, body: unknown): Promise<any> {
  const res = await server.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/** Submit, replay, claim, let a lease expire, reclaim, complete, and a few refused calls. */
async function traffic(queue: string): Promise<void> {
  const submit = { queue, task: "metrics.probe", payload: { n: 1 }, idempotencyKey: "prom-1" };
  const { job } = await ok("Submit", submit);
  expect((await ok("Submit", submit)).deduplicated).toBe(true);

  const first = await ok("Claim", { queue, workerId: "prom-worker", leaseDuration: "1s" });
  expect(first.leases[0].job.id).toBe(job.id);
  clock.advance(5_000);
  // The next Claim recovers the expired lease (RETRY, eligible at once) and takes the job again.
  const second = await ok("Claim", { queue, workerId: "prom-worker", leaseDuration: "60s" });
  expect(second.leases[0].job).toMatchObject({ id: job.id, attempts: 2 });
  await ok("Complete", { jobId: job.id, leaseToken: second.leases[0].leaseToken });

  // Failed calls: a stale token (aborted) and a malformed id (invalid_argument).
  expect((await server.call("Complete", { jobId: job.id, leaseToken: first.leases[0].leaseToken })).status).toBe(409);
  expect((await server.call("GetJob", { jobId: "not-a-uuid" })).status).toBe(400);

  // A paused queue without jobs, so the paused gauge has a 1 beside the 0 of `queue`.
  await ok("PauseQueue", { queue: `${queue}-paused` });

  // One job left waiting, so the oldest-pending gauge has something to measure.
  await ok("Submit", { queue, task: "metrics.probe" });
  clock.advance(2_000);
}

describe("Prometheus metrics on the side port", () => {
  it.skipIf(skip)(
    "pass promtool check metrics after traffic and carry the required series",
    async () => {
      requireTool(available, "promtool (Debian package prometheus)");
      const queue = "prom";
      await traffic(queue);

      const res = await fetch(`${server.metricsUrl}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();

      const check = await run(PROMTOOL, ["check", "metrics"], { input: text });
      expect(check.code, `promtool check metrics:\n${check.stdout}${check.stderr}`).toBe(0);
      expect(check.stdout + check.stderr).toBe("");

      const samples = parseExposition(text);
      const find = (name: string, labels: Record<string, string> = {}) =>
        samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      const labelNames = (name: string) => new Set(find(name).map((s) => Object.keys(s.labels).sort().join(",")));

      expect(labelNames("leasequeue_jobs")).toEqual(new Set(["queue,state"]));
      expect(find("leasequeue_jobs", { queue, state: "completed" })[0]?.value).toBe(1);
      expect(find("leasequeue_jobs", { queue, state: "queued" })[0]?.value).toBe(1);
      expect(find("leasequeue_jobs", { queue, state: "running" })[0]?.value).toBe(0);

      expect(labelNames("leasequeue_oldest_pending_seconds")).toEqual(new Set(["queue"]));
      expect(find("leasequeue_oldest_pending_seconds", { queue })[0]?.value).toBe(2);

      expect(labelNames("leasequeue_queue_paused")).toEqual(new Set(["queue"]));
      expect(find("leasequeue_queue_paused", { queue })[0]?.value).toBe(0);
      expect(find("leasequeue_queue_paused", { queue: `${queue}-paused` })[0]?.value).toBe(1);

      expect(labelNames("leasequeue_transitions_total")).toEqual(new Set(["kind,queue"]));
      const transitions = Object.fromEntries(find("leasequeue_transitions_total", { queue }).map((s) => [s.labels.kind, s.value]));
      expect(transitions).toMatchObject({ submitted: 2, claimed: 2, lease_expired: 1, completed: 1 });

      expect(find("leasequeue_lease_expirations_total")).not.toHaveLength(0);
      expect(find("leasequeue_lease_expirations_total", { queue })[0]?.value).toBe(1);
      expect(find("leasequeue_idempotent_replays_total")).not.toHaveLength(0);
      expect(find("leasequeue_idempotent_replays_total", { queue })[0]?.value).toBe(1);

      expect(labelNames("leasequeue_rpc_duration_seconds_bucket")).toEqual(new Set(["code,le,method"]));
      const count = (method: string, code: string) => find("leasequeue_rpc_duration_seconds_count", { method, code })[0]?.value ?? 0;
      expect(count("Submit", "ok")).toBe(3);
      expect(count("Claim", "ok")).toBe(2);
      expect(count("Complete", "ok")).toBe(1);
      expect(count("Complete", "aborted")).toBe(1);
      expect(count("GetJob", "invalid_argument")).toBe(1);
      expect(find("leasequeue_rpc_duration_seconds_bucket", { method: "Submit", code: "ok", le: "+Inf" })[0]?.value).toBe(3);

      expect(find("process_cpu_seconds_total")).toHaveLength(1);
    },
    60_000,
  );

  it("keeps the two ports apart: no /metrics on the API port, no RPC on the side port", async () => {
    expect((await fetch(`${server.apiUrl}/metrics`)).status).toBe(404);

    const rpc = await fetch(`${server.metricsUrl}/leasequeue.v1.LeaseQueueService/GetStats`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(rpc.status).toBe(404);
    const health = await fetch(`${server.metricsUrl}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(health.status).toBe(404);
    // The same RPC is served on the API port.
    expect((await server.call("GetStats", {})).status).toBe(200);
  }, 60_000);
});

/**
 * The shipped monitoring (deploy/prometheus, deploy/grafana) as Prometheus
 * reads it: the alerting rules load, their unit tests pass (each alert firing
 * and staying quiet), the example configuration loads them, and every
 * dashboard query parses as PromQL.
 */
describe("deploy/prometheus and deploy/grafana", () => {
  const promDir = join(REPO_ROOT, "deploy", "prometheus");

  it.skipIf(skip)(
    "alerts.yaml passes promtool check rules",
    async () => {
      requireTool(available, "promtool (Debian package prometheus)");
      const check = await run(PROMTOOL, ["check", "rules", "alerts.yaml"], { cwd: promDir });
      expect(check.code, `promtool check rules:\n${check.stdout}${check.stderr}`).toBe(0);
      expect(check.stdout).toMatch(/SUCCESS: 7 rules found/);
    },
    60_000,
  );

  it.skipIf(skip)(
    "alerts.yaml passes its unit tests (promtool test rules alerts.test.yaml)",
    async () => {
      requireTool(available, "promtool (Debian package prometheus)");
      const test = await run(PROMTOOL, ["test", "rules", "alerts.test.yaml"], { cwd: promDir });
      expect(test.code, `promtool test rules:\n${test.stdout}${test.stderr}`).toBe(0);
    },
    60_000,
  );

  it("the unit tests cover every alert both firing and quiet", () => {
    const alerts = alertExpressions().map((e) => e.where.split("/").pop()!);
    const tests = parseYaml(readFileSync(join(promDir, "alerts.test.yaml"), "utf8")) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const cases = tests.tests.flatMap((t) => t.alert_rule_test);
    for (const alert of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} is never shown firing`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} is never shown quiet`,
      ).toBe(true);
    }
    expect(new Set(cases.map((c) => c.alertname))).toEqual(new Set(alerts));
  });

  it.skipIf(skip)(
    "prometheus.yml passes promtool check config (and loads alerts.yaml)",
    async () => {
      requireTool(available, "promtool (Debian package prometheus)");
      const check = await run(PROMTOOL, ["check", "config", "prometheus.yml"], { cwd: promDir });
      expect(check.code, `promtool check config:\n${check.stdout}${check.stderr}`).toBe(0);
      expect(check.stdout).toMatch(/SUCCESS: 7 rules found/);
    },
    60_000,
  );

  it.skipIf(skip)(
    "every dashboard query parses as PromQL (promtool check rules over them as recording rules)",
    async () => {
      requireTool(available, "promtool (Debian package prometheus)");
      const queries = dashboardExpressions();
      expect(queries.length).toBeGreaterThan(20);
      // Grafana's template variables stay inside label values, where they are plain strings to PromQL.
      const rules = {
        groups: [{ name: "dashboard", rules: queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr })) }],
      };
      const dir = mkdtempSync(join(tmpdir(), "leasequeue-dashboard-"));
      try {
        writeFileSync(join(dir, "dashboard-rules.yaml"), stringifyYaml(rules));
        const check = await run(PROMTOOL, ["check", "rules", "dashboard-rules.yaml"], { cwd: dir });
        const named = queries.map((q, i) => `query_${i}: ${q.where}`).join("\n");
        expect(check.code, `promtool check rules:\n${check.stdout}${check.stderr}\n${named}`).toBe(0);
        expect(check.stdout).toContain(`SUCCESS: ${queries.length} rules found`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
