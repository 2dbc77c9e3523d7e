/**
 * The PromQL reading of test/helpers/promql-metric-names.ts: metric names are
 * found, and nothing else in an expression is taken for one.
 */
import { describe, expect, it } from "vitest";
import { grafanaToPromql, variableQueryExpression } from "../helpers/deploy-expressions.js";
import { metricNamesIn, unknownMetricNames } from "../helpers/promql-metric-names.js";

describe("metricNamesIn", () => {
  it("finds a bare selector and one with label matchers", () => {
    expect(metricNamesIn("up")).toEqual(["up"]);
    expect(metricNamesIn('leasequeue_jobs{queue="billing", state=~"queued|retry"}')).toEqual(["leasequeue_jobs"]);
  });

  it("skips function and aggregation names, by/without lists, ranges and numbers", () => {
    expect(
      metricNamesIn('histogram_quantile(0.99, sum by (le, method) (rate(leasequeue_rpc_duration_seconds_bucket{code="ok"}[5m])))'),
    ).toEqual(["leasequeue_rpc_duration_seconds_bucket"]);
    expect(metricNamesIn("sum without (instance, job) (increase(a_total[1h:5m])) > 1e3")).toEqual(["a_total"]);
    expect(metricNamesIn("SUM BY (queue) (b) * 0x10 + .5 - Inf")).toEqual(["b"]);
  });

  it("skips vector-matching keywords and their label lists, and word operators", () => {
    expect(metricNamesIn("a / on (queue) group_left (state) b")).toEqual(["a", "b"]);
    expect(metricNamesIn("a * ignoring(kind) group_right c")).toEqual(["a", "c"]);
    expect(metricNamesIn("x > bool 1 and y or z unless w")).toEqual(["x", "y", "z", "w"]);
    expect(metricNamesIn("x offset 5m @ start()")).toEqual(["x"]);
    expect(metricNamesIn("atan2(0) + p atan2 q")).toEqual(["p", "q"]);
  });

  it("never reads label names or label values as metrics, whatever they contain", () => {
    expect(metricNamesIn('m{rate="sum by (x) (fake_metric)", by="on", le="+Inf"}')).toEqual(["m"]);
    expect(metricNamesIn("m{a='it\\'s', b=`raw \\`}")).toEqual(["m"]);
    expect(metricNamesIn('label_replace(m, "dst", "$1", "src", "(.*)")')).toEqual(["m"]);
    expect(metricNamesIn('count_values("value", m)')).toEqual(["m"]);
  });

  it("reads recording-rule names with colons and names given by __name__ or quoted", () => {
    expect(metricNamesIn("job:leasequeue_jobs:sum")).toEqual(["job:leasequeue_jobs:sum"]);
    expect(metricNamesIn('{__name__="leasequeue_jobs", queue="q"}')).toEqual(["leasequeue_jobs"]);
    expect(metricNamesIn('{"leasequeue_jobs", queue="q"}')).toEqual(["leasequeue_jobs"]);
  });

  it("ignores comments and names a metric once", () => {
    expect(metricNamesIn("a # not_a_metric\n + a")).toEqual(["a"]);
  });

  it("refuses what it cannot check instead of guessing", () => {
    expect(() => metricNamesIn('{__name__=~"leasequeue_.*"}')).toThrow(/__name__/);
    expect(() => metricNamesIn("rate(x[$interval])")).toThrow(/unexpected range selector/);
    expect(() => metricNamesIn("x{job=$job}")).toThrow(/unexpected character "\$"|quoted value/);
    expect(() => metricNamesIn('x{job="unterminated}')).toThrow(/unterminated string/);
    expect(() => metricNamesIn("rate(x[5m]")).toThrow(/unbalanced|unterminated/);
  });
});

describe("unknownMetricNames", () => {
  const exported = new Set(["leasequeue_jobs", "leasequeue_rpc_duration_seconds_bucket", "leasequeue_rpc_duration_seconds_count"]);

  it("passes expressions that read only exported series", () => {
    expect(
      unknownMetricNames(
        [
          { where: "a", expr: 'sum by (queue) (leasequeue_jobs{state="dead"})' },
          { where: "b", expr: "sum(rate(leasequeue_rpc_duration_seconds_count[5m]))" },
        ],
        exported,
      ),
    ).toEqual([]);
  });

  it("names each expression that reads a metric the server does not export", () => {
    expect(
      unknownMetricNames(
        [
          { where: "typo", expr: "sum(rate(leasequeue_job_total[5m]))" },
          { where: "fine", expr: "leasequeue_jobs" },
          // A histogram is queried through its series, never by its family name.
          { where: "bare histogram", expr: "rate(leasequeue_rpc_duration_seconds[5m])" },
        ],
        exported,
      ),
    ).toEqual([
      { where: "typo", metric: "leasequeue_job_total" },
      { where: "bare histogram", metric: "leasequeue_rpc_duration_seconds" },
    ]);
  });
});

describe("Grafana queries as PromQL", () => {
  it("replaces interval variables; template variables stay inside label values", () => {
    expect(grafanaToPromql('rate(x{job="$job"}[$__rate_interval]) + rate(y[${__interval}])')).toBe('rate(x{job="$job"}[5m]) + rate(y[5m])');
    expect(metricNamesIn(grafanaToPromql('rate(x{job="$job", queue=~"${queue}"}[$__rate_interval])'))).toEqual(["x"]);
  });

  it("takes the PromQL out of label_values and query_result variable queries", () => {
    expect(variableQueryExpression('label_values(leasequeue_jobs{job="$job"}, queue)')).toBe('leasequeue_jobs{job="$job"}');
    expect(variableQueryExpression("label_values(queue)")).toBeUndefined();
    expect(variableQueryExpression("query_result(topk(5, leasequeue_jobs))")).toBe("topk(5, leasequeue_jobs)");
    expect(() => variableQueryExpression("metrics(leasequeue_.*)")).toThrow(/unsupported/);
  });
});
