/**
 * Every PromQL expression shipped in deploy/: the alerting rules of
 * deploy/prometheus/alerts.yaml and the panel queries and template variable
 * queries of deploy/grafana/leasequeue.json, with Grafana's variables
 * replaced so that each is plain PromQL.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import type { NamedExpression } from "./promql-metric-names.js";

export const ALERTS_FILE = fileURLToPath(new URL("../../deploy/prometheus/alerts.yaml", import.meta.url));
export const DASHBOARD_FILE = fileURLToPath(new URL("../../deploy/grafana/leasequeue.json", import.meta.url));

interface RuleGroup {
  name: string;
  rules: { alert?: string; record?: string; expr: string }[];
}

export function alertExpressions(text = readFileSync(ALERTS_FILE, "utf8")): NamedExpression[] {
  const { groups } = parseYaml(text) as { groups: RuleGroup[] };
  return groups.flatMap((g) => g.rules.map((r) => ({ where: `alerts.yaml: ${g.name}/${r.alert ?? r.record}`, expr: String(r.expr) })));
}

/** Grafana's interval variables, which stand where PromQL has a duration. */
const INTERVAL_VARIABLES = /\$\{?(__rate_interval|__interval|__range)\}?/g;

/**
 * A Grafana query as PromQL: interval variables become `5m`; template
 * variables may only stand inside label values (quoted), where they need no
 * replacing. One left outside a string makes the tokenizer refuse the query.
 */
export function grafanaToPromql(query: string): string {
  return query.replace(INTERVAL_VARIABLES, "5m");
}

/**
 * The PromQL inside a Grafana Prometheus variable query:
 * `label_values(expr, label)` and `query_result(expr)` hold one, `label_values(label)`
 * none. Other forms (metrics(), label_names()) are refused.
 */
export function variableQueryExpression(query: string): string | undefined {
  const labelValues = /^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/s.exec(query);
  if (labelValues) return labelValues[1];
  if (/^\s*label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/.test(query)) return undefined;
  const queryResult = /^\s*query_result\((.*)\)\s*$/s.exec(query);
  if (queryResult) return queryResult[1];
  throw new Error(`unsupported Grafana variable query: ${query}`);
}

interface Panel {
  title?: string;
  type: string;
  targets?: { expr?: string; refId?: string }[];
  panels?: Panel[];
}

interface Dashboard {
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: string | { query: string } }[] };
}

function* allPanels(panels: readonly Panel[]): Generator<Panel> {
  for (const p of panels) {
    yield p;
    yield* allPanels(p.panels ?? []);
  }
}

export function dashboardExpressions(text = readFileSync(DASHBOARD_FILE, "utf8")): NamedExpression[] {
  const dashboard = JSON.parse(text) as Dashboard;
  const found: NamedExpression[] = [];
  for (const panel of allPanels(dashboard.panels)) {
    for (const target of panel.targets ?? []) {
      if (target.expr === undefined) throw new Error(`panel "${panel.title}" target ${target.refId} has no expr`);
      found.push({ where: `leasequeue.json: panel "${panel.title}" ${target.refId}`, expr: grafanaToPromql(target.expr) });
    }
  }
  for (const variable of dashboard.templating.list) {
    if (variable.type !== "query") continue;
    const query = typeof variable.query === "string" ? variable.query : variable.query?.query;
    if (query === undefined) throw new Error(`variable ${variable.name} has no query`);
    const expr = variableQueryExpression(query);
    if (expr !== undefined) found.push({ where: `leasequeue.json: variable $${variable.name}`, expr: grafanaToPromql(expr) });
  }
  return found;
}
