/**
 * A job's life drawn to scale from its events (ListJobEvents): one band per
 * stretch of time in one state (waiting, queued, running, retry, and where it
 * finished: completed, dead or cancelled), each running stretch named by
 * its attempt. Plain SVG, coloured by app.css (`seg-*`), like the charts.
 * Events that keep the state (heartbeats, progress) do not split a band. An
 * unfinished job's last band reaches to now and grows while the page is open.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { useEffect, useState } from "preact/hooks";
import { formatDurationText } from "../../domain/duration-text.js";
import { JobState, type JobEvent } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { Legend } from "../charts.js";
import { stateLabel, stateName } from "../format.js";

const WIDTH = 720;
const HEIGHT = 62;
const BAR = { top: 6, height: 26 } as const;
/** A band narrower than this keeps its name to its tooltip. */
const LABEL_MIN_PX = 64;
/** How often an unfinished job's timeline is redrawn to reach the present. */
const GROW_MS = 2_000;

const FINISHED: ReadonlySet<JobState> = new Set([JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED]);

export interface Stretch {
  state: JobState;
  from: number;
  to: number;
  /** The job's attempts during the stretch (the attempt a running stretch is). */
  attempt: number;
}

/**
 * The stretches of a job's events (oldest first), the last one ending at
 * `now` unless the job finished (then it is the moment it finished, of no
 * length).
 */
export function stretchesOf(events: readonly JobEvent[], now: number): Stretch[] {
  const stretches: Stretch[] = [];
  let current: Stretch | undefined;
  for (const e of events) {
    const t = timestampMs(e.eventTime!);
    if (current !== undefined && e.toState === current.state) continue;
    if (current !== undefined) {
      current.to = t;
      stretches.push(current);
    }
    current = { state: e.toState, from: t, to: t, attempt: e.attempt };
  }
  if (current !== undefined) {
    current.to = FINISHED.has(current.state) ? current.from : Math.max(current.from, now);
    stretches.push(current);
  }
  return stretches;
}

/** 13:05:02.120 (UTC). */
function preciseTime(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

function stretchName(s: Stretch): string {
  return s.state === JobState.RUNNING ? `attempt ${s.attempt}` : stateLabel(s.state).toLowerCase();
}

export function AttemptTimeline({ events }: { events: readonly JobEvent[] }) {
  const finished = events.length > 0 && FINISHED.has(events[events.length - 1].toState);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (finished) return;
    const timer = setInterval(() => setNow(Date.now()), GROW_MS);
    return () => clearInterval(timer);
  }, [finished]);
  const stretches = stretchesOf(events, now);
  if (stretches.length === 0) return null;

  const start = stretches[0].from;
  const end = Math.max(start + 1, stretches[stretches.length - 1].to);
  const x = (t: number) => ((t - start) / (end - start)) * WIDTH;
  const attempts = stretches.filter((s) => s.state === JobState.RUNNING).length;
  const waited = stretches.some((s) => s.state === JobState.WAITING);
  const span = formatDurationText(end - start, "glance");

  return (
    <figure class="attempts" aria-labelledby="attempts-title">
      <figcaption>
        <span id="attempts-title" class="chart-title">
          {attempts === 1 ? "1 attempt" : `${attempts} attempts`} over {span}
        </span>
        <Legend
          items={[
            ...[...(waited ? [JobState.WAITING] : []), JobState.QUEUED, JobState.RUNNING, JobState.RETRY].map((state) => ({
              key: stateName(state),
              swatch: `seg-${stateName(state)}`,
              label: stateLabel(state),
            })),
            { key: "completed", swatch: "seg-completed", label: "Done" },
          ]}
        />
      </figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`To scale, ${span}: ${stretches.map(stretchName).join(", then ")}`}
        data-testid="attempt-timeline"
      >
        {stretches.map((s, i) => {
          const done = FINISHED.has(s.state) && s.to === s.from;
          const left = done ? Math.min(x(s.from), WIDTH - 4) : x(s.from);
          const width = done ? 4 : Math.max(1, x(s.to) - x(s.from));
          const name = stretchName(s);
          const tip = done
            ? `${stateLabel(s.state)} at ${preciseTime(s.from)} UTC`
            : `${name}: ${preciseTime(s.from)}–${preciseTime(s.to)} UTC, ${formatDurationText(s.to - s.from, "glance")}`;
          return (
            <g key={`${i}-${s.from}`}>
              <rect
                class={`seg-${stateName(s.state)}`}
                x={left}
                y={BAR.top}
                width={width}
                height={BAR.height}
                data-state={stateName(s.state)}
                data-attempt={s.state === JobState.RUNNING ? s.attempt : undefined}
              >
                <title>{tip}</title>
              </rect>
              {!done && width >= LABEL_MIN_PX && (
                <text class="seg-label" x={left + width / 2} y={BAR.top + BAR.height / 2} text-anchor="middle" dominant-baseline="middle">
                  {name}
                </text>
              )}
            </g>
          );
        })}
        <text class="tick" x={0} y={HEIGHT - 8} text-anchor="start">
          {preciseTime(start)} UTC
        </text>
        <text class="tick" x={WIDTH} y={HEIGHT - 8} text-anchor="end">
          {finished ? `${preciseTime(end)} UTC` : "now"}
        </text>
      </svg>
    </figure>
  );
}
