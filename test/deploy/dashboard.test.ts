/**
 * deploy/grafana/leasequeue.json imports into any Grafana with a Prometheus
 * data source: the data source is a template variable (no uid of ours baked
 * in), queries follow the job, instance and queue selections, and panels do
 * not overlap.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DASHBOARD_FILE } from "../helpers/deploy-expressions.js";

interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: GridPos;
  datasource?: { type: string; uid: string };
  targets?: { expr: string; datasource?: { type: string; uid: string } }[];
  panels?: Panel[];
}
const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; includeAll?: boolean; multi?: boolean }[] };
};
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const graphs = panels.filter((p) => p.type !== "row");
const variable = (name: string) => dashboard.templating.list.find((v) => v.name === name);
const DATASOURCE = { type: "prometheus", uid: "${datasource}" };

describe("the Grafana dashboard", () => {
  it("has a fixed uid, a recent schema and the datasource, job, instance and queue variables", () => {
    expect(dashboard.uid).toBe("leasequeue");
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(variable("datasource")).toMatchObject({ type: "datasource", query: "prometheus" });
    expect(variable("job")).toMatchObject({ type: "query" });
    expect(variable("instance")).toMatchObject({ type: "query", multi: true, includeAll: true });
    expect(variable("queue")).toMatchObject({ type: "query", multi: true, includeAll: true });
  });

  it("queries the templated data source in every panel and target", () => {
    expect(graphs.length).toBeGreaterThan(15);
    for (const p of graphs) {
      expect(p.datasource, p.title).toEqual(DATASOURCE);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.datasource, p.title).toEqual(DATASOURCE);
    }
  });

  it("follows the job and instance selection in every query, and the queue selection where a metric has a queue", () => {
    for (const p of graphs) {
      for (const { expr } of p.targets!) {
        expect(expr, p.title).toContain('job="$job"');
        expect(expr, p.title).toContain('instance=~"$instance"');
        if (/leasequeue_(jobs|oldest_pending_seconds|transitions_total|lease_expirations_total|idempotent_replays_total)\{/.test(expr)) {
          expect(expr, p.title).toContain('queue=~"$queue"');
        }
      }
    }
  });

  it("has unique panel ids and no overlapping panels", () => {
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    const overlaps = (a: GridPos, b: GridPos) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
    for (const [i, a] of panels.entries()) {
      expect(a.gridPos.x + a.gridPos.w, a.title).toBeLessThanOrEqual(24);
      for (const b of panels.slice(i + 1)) expect(overlaps(a.gridPos, b.gridPos), `${a.title} / ${b.title}`).toBe(false);
    }
  });
});
