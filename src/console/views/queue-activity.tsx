/**
 * #/queues/<queue> : one queue's last hour, minute by minute, from
 * GetQueueActivity (docs/api.md "Queue activity"): jobs completed and
 * attempts failed per minute, the queued, retry and running counts over
 * time, and the median and 95th percentile of the leases' waits. The
 * samples are the database's, so every server shows the same. The page
 * follows the live feed (an event of the queue reloads it, at most once a
 * second) and moves on at each new minute when nothing happens.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { useEffect } from "preact/hooks";
import { formatDurationText } from "../../domain/duration-text.js";
import type { GetQueueActivityResponse } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client } from "../api.js";
import { clockTime, DURATION_STEPS_MS, TimeChart } from "../charts.js";
import { ErrorNotice } from "../components.js";
import { durationMs, formatCount } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { groupsHref, jobsHref } from "../router.js";

/** Events of the queue reload the charts at most this often. */
const ACTIVITY_REFRESH_MS = 1_000;

/** A whole number as the value axis writes it: 1,250. */
const count = (n: number) => n.toLocaleString("en-US");
/** A wait as the value axis writes it: 250 ms, 1.5 s, 2 min, 1 h (not "1 h 0 min"). */
const wait = (ms: number) => (ms === 0 ? "0" : formatDurationText(Math.round(ms), "glance").replace(/ 0 (min|s)$/, ""));

/** Reloads at the start of each minute (by the browser's clock, plus a second for the server's), so the window moves on. */
function useEveryMinute(reload: () => void): void {
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout>;
    const next = (): void => {
      timer = setTimeout(
        () => {
          reload();
          next();
        },
        60_000 - (Date.now() % 60_000) + 1_000,
      );
    };
    next();
    return () => clearTimeout(timer);
  }, [reload]);
}

export function QueueActivityPage({ queue }: { queue: string }) {
  const res = useResource((signal) => client.getQueueActivity({ queue }, { signal }), [queue]);
  const refresh = useThrottled(res.reload, ACTIVITY_REFRESH_MS);
  useLive((signal) => {
    if (signal.kind === "resync" || signal.event.queue === queue) refresh();
  });
  useEveryMinute(res.reload);

  return (
    <section aria-labelledby="queue-title">
      <h1 id="queue-title">
        Queue <span class="mono">{queue}</span>
      </h1>
      <p class="links">
        <a href={jobsHref({ queue })}>Jobs of {queue}</a>
        <a href={groupsHref(queue)}>Groups of {queue}</a>
        <a href="#/">All queues</a>
      </p>
      {res.error && <ErrorNotice problem={res.error} what="the queue's activity" onRetry={res.reload} />}
      {res.data === undefined ? !res.error && <p class="muted">Loading…</p> : <ActivityCharts activity={res.data} />}
    </section>
  );
}

function ActivityCharts({ activity }: { activity: GetQueueActivityResponse }) {
  const points = activity.points;
  const starts = points.map((p) => timestampMs(p.startTime!));
  const stepMs = durationMs(activity.step);
  const num = (v: bigint) => Number(v);
  const waitOf = (d: (typeof points)[number]["leaseWaitP50"]) => (d === undefined ? null : durationMs(d));
  const last = points.at(-1);
  const completed = points.reduce((n, p) => n + p.completed, 0n);
  const failed = points.reduce((n, p) => n + p.failed, 0n);
  const from = starts[0];
  const to = from === undefined ? undefined : from + points.length * stepMs;

  return (
    <>
      <p class="muted" data-testid="activity-summary">
        {from !== undefined && to !== undefined && (
          <>
            {clockTime(from)}–{clockTime(to)} UTC, per {stepMs === 60_000 ? "minute" : formatDurationText(stepMs, "glance")}:{" "}
          </>
        )}
        {formatCount(completed)} completed, {formatCount(failed)} failed attempts
        {last !== undefined && (
          <>
            ; now {formatCount(last.queued)} queued, {formatCount(last.retry)} in retry, {formatCount(last.running)} running
          </>
        )}
        .
      </p>
      <div class="charts">
        <TimeChart
          id="throughput"
          title="Completed and failed per minute"
          kind="bars"
          starts={starts}
          stepMs={stepMs}
          format={count}
          series={[
            { key: "completed", label: "Completed", values: points.map((p) => num(p.completed)) },
            { key: "failed", label: "Failed attempts", values: points.map((p) => num(p.failed)) },
          ]}
        />
        <TimeChart
          id="depth"
          title="Queued, retry and running"
          kind="lines"
          at="end"
          starts={starts}
          stepMs={stepMs}
          format={count}
          series={[
            { key: "queued", label: "Queued", values: points.map((p) => num(p.queued)) },
            { key: "retry", label: "Retry", values: points.map((p) => num(p.retry)) },
            { key: "running", label: "Running", values: points.map((p) => num(p.running)) },
          ]}
        />
        <TimeChart
          id="wait"
          title="Wait from eligible to leased"
          kind="lines"
          starts={starts}
          stepMs={stepMs}
          format={wait}
          steps={DURATION_STEPS_MS}
          series={[
            { key: "p50", label: "p50", values: points.map((p) => waitOf(p.leaseWaitP50)) },
            { key: "p95", label: "p95", values: points.map((p) => waitOf(p.leaseWaitP95)) },
          ]}
        />
      </div>
      <p class="muted">
        The counts are those at the end of each minute; the waits, from when a job became eligible to its lease, are estimated within the
        buckets of a histogram. The samples are kept for a day.
      </p>
    </>
  );
}
