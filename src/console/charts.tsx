/**
 * Charts over time, drawn as plain SVG: a value axis from zero with round
 * ticks, a time axis in UTC (as every time in the console), and stacked bars
 * or lines. No charting library: what the queue page needs is this file,
 * and SVG drawn by Preact needs no inline script or style, so the console's
 * CSP (`default-src 'self'`) holds. Geometry goes in SVG attributes; every
 * colour comes from app.css (the `series-*` classes), which follows the
 * light and dark color schemes.
 */

/** The drawing's coordinate system (the SVG scales to its box's width). */
const WIDTH = 720;
const HEIGHT = 190;
const MARGIN = { left: 60, right: 12, top: 10, bottom: 24 } as const;
const PLOT_W = WIDTH - MARGIN.left - MARGIN.right;
const PLOT_H = HEIGHT - MARGIN.top - MARGIN.bottom;
const MINUTE = 60_000;

export interface ChartSeries {
  /** Colours it (the class `series-<key>`) and names it in data attributes. */
  key: string;
  label: string;
  /** One value per point; null: none (a line breaks there). */
  values: ReadonlyArray<number | null>;
}

export interface TimeChartProps {
  /** Names the chart: `data-testid="chart-<id>"`, and its title's id. */
  id: string;
  title: string;
  /** Each point's start (epoch ms), oldest first. */
  starts: readonly number[];
  stepMs: number;
  /** Bars: the series stacked in each step. Lines: one per series. */
  kind: "bars" | "lines";
  /** Where a line's value sits in its step: at its end (a count at the end of the step) or its middle (a figure of the whole step). */
  at?: "end" | "middle";
  series: readonly ChartSeries[];
  /** A value as the axis and the tooltips write it. */
  format: (value: number) => string;
  /** The sizes the value axis may step by, smallest first (durations: DURATION_STEPS_MS); default 1, 2, 5 x 10^n. */
  steps?: readonly number[];
}

/** Value-axis steps for waits (ms): round in the units the axis writes them in. */
export const DURATION_STEPS_MS: readonly number[] = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
  3_600_000, 7_200_000,
];

/** The first of `steps` not below `raw`; without steps, the smallest 1, 2, 5 x 10^n (at least 1) that is not. */
function niceStep(raw: number, steps: readonly number[] | undefined): number {
  if (steps !== undefined) return steps.find((step) => step >= raw) ?? steps[steps.length - 1];
  if (raw <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/** Minutes between time ticks: the first of these that gives at most 7 ticks over the span. */
const TIME_TICK_MINUTES = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440];

function timeTicks(start: number, end: number): number[] {
  const every = (TIME_TICK_MINUTES.find((m) => (end - start) / (m * MINUTE) <= 7) ?? 1440) * MINUTE;
  const ticks: number[] = [];
  for (let t = Math.ceil(start / every) * every; t <= end; t += every) ticks.push(t);
  return ticks;
}

/** 13:05 (UTC). */
export function clockTime(ms: number): string {
  return new Date(ms).toISOString().slice(11, 16);
}

/** "13:05-13:06 UTC", a step as its tooltip names it. */
function stepText(start: number, stepMs: number): string {
  return `${clockTime(start)}–${clockTime(start + stepMs)} UTC`;
}

export function TimeChart({ id, title, starts, stepMs, kind, at = "middle", series, format, steps }: TimeChartProps) {
  const n = starts.length;
  const start = starts[0] ?? 0;
  const end = start + n * stepMs;
  const x = (t: number) => MARGIN.left + ((t - start) / Math.max(1, end - start)) * PLOT_W;

  // The value axis: from 0 to a round maximum over what is drawn (stacked for bars), in four ticks.
  let max = 0;
  for (let i = 0; i < n; i++) {
    if (kind === "bars")
      max = Math.max(
        max,
        series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0),
      );
    else for (const s of series) max = Math.max(max, s.values[i] ?? 0);
  }
  const tick = niceStep(max / 4, steps);
  const top = tick * Math.max(1, Math.ceil(max / tick));
  const y = (v: number) => MARGIN.top + PLOT_H - (v / top) * PLOT_H;
  const valueTicks = Array.from({ length: Math.round(top / tick) + 1 }, (_, i) => i * tick);
  const totals = Object.fromEntries(
    series.map((s) => [`data-total-${s.key}`, String(s.values.reduce<number>((sum, v) => sum + (v ?? 0), 0))]),
  );
  const latest = series.map((s) => `${s.label} ${lastValue(s.values, format)}`).join(", ");

  return (
    <figure class="chart" aria-labelledby={`chart-${id}-title`}>
      <figcaption>
        <span id={`chart-${id}-title`} class="chart-title">
          {title}
        </span>
        <Legend items={series.map((s) => ({ key: s.key, swatch: `series-${s.key}`, label: s.label }))} />
      </figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`${title}, ${clockTime(start)} to ${clockTime(end)} UTC; latest: ${latest}`}
        data-testid={`chart-${id}`}
        data-points={n}
        {...totals}
      >
        <g class="grid">
          {valueTicks.map((v) => (
            <g key={v}>
              <line x1={MARGIN.left} x2={WIDTH - MARGIN.right} y1={y(v)} y2={y(v)} />
              <text x={MARGIN.left - 6} y={y(v)} text-anchor="end" dominant-baseline="middle">
                {format(v)}
              </text>
            </g>
          ))}
          {timeTicks(start, end).map((t) => (
            <text key={t} x={x(t)} y={HEIGHT - 6} text-anchor="middle">
              {clockTime(t)}
            </text>
          ))}
        </g>
        {kind === "bars" ? (
          <Bars starts={starts} stepMs={stepMs} series={series} x={x} y={y} format={format} />
        ) : (
          series.map((s) => <Line key={s.key} starts={starts} stepMs={stepMs} at={at} series={s} x={x} y={y} format={format} />)
        )}
        <line class="axis" x1={MARGIN.left} x2={WIDTH - MARGIN.right} y1={y(0)} y2={y(0)} />
      </svg>
    </figure>
  );
}

function lastValue(values: ReadonlyArray<number | null>, format: (v: number) => string): string {
  for (let i = values.length - 1; i >= 0; i--) {
    const v = values[i];
    if (v !== null) return format(v);
  }
  return "none";
}

interface Scales {
  starts: readonly number[];
  stepMs: number;
  x: (t: number) => number;
  y: (v: number) => number;
  format: (v: number) => string;
}

/** Each step's series stacked, the first at the bottom; a step with nothing draws nothing. */
function Bars({ starts, stepMs, series, x, y, format }: Scales & { series: readonly ChartSeries[] }) {
  const width = Math.max(1, (x(stepMs) - x(0)) * 0.8);
  return (
    <g class="bars">
      {starts.map((t, i) => {
        let base = 0;
        return series.map((s) => {
          const v = s.values[i] ?? 0;
          if (v <= 0) return null;
          const from = base;
          base += v;
          return (
            <rect
              key={`${s.key}-${t}`}
              class={`series-${s.key}`}
              x={x(t) + (x(stepMs) - x(0) - width) / 2}
              y={y(base)}
              width={width}
              height={y(from) - y(base)}
              data-series={s.key}
              data-value={v}
            >
              <title>{`${stepText(t, stepMs)}: ${s.label.toLowerCase()} ${format(v)}`}</title>
            </rect>
          );
        });
      })}
    </g>
  );
}

/** One series as a line through its points, broken where a value is null, with a dot on each point. */
function Line({ starts, stepMs, at, series, x, y, format }: Scales & { at: "end" | "middle"; series: ChartSeries }) {
  const offset = at === "end" ? stepMs : stepMs / 2;
  const runs: string[] = [];
  let run = "";
  starts.forEach((t, i) => {
    const v = series.values[i];
    if (v === null) {
      if (run !== "") runs.push(run);
      run = "";
      return;
    }
    run += `${run === "" ? "M" : "L"}${x(t + offset).toFixed(1)},${y(v).toFixed(1)}`;
  });
  if (run !== "") runs.push(run);
  return (
    <g class={`line series-${series.key}`} data-series={series.key}>
      {runs.map((d) => (
        <path key={d} d={d} />
      ))}
      {starts.map((t, i) => {
        const v = series.values[i];
        return v === null ? null : (
          <circle key={t} cx={x(t + offset)} cy={y(v)} r={2} data-value={v}>
            <title>{`${stepText(t, stepMs)}: ${series.label.toLowerCase()} ${format(v)}`}</title>
          </circle>
        );
      })}
    </g>
  );
}

/** A figure's legend: a coloured swatch (its class) and a label per item. */
export function Legend({ items }: { items: ReadonlyArray<{ key: string; swatch: string; label: string }> }) {
  return (
    <span class="legend">
      {items.map((item) => (
        <span key={item.key} class="legend-item">
          <span class={`swatch ${item.swatch}`} aria-hidden="true" />
          {item.label}
        </span>
      ))}
    </span>
  );
}
