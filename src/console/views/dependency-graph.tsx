/**
 * A job's place in its workflow (docs/api.md "Dependencies"): its counts,
 * what a waiting job waits on, and a small graph with the job in the
 * middle, the jobs it depends on to its left and the jobs that depend on it
 * to its right, each coloured by its state and linked to its page. Plain
 * SVG like the charts: geometry in attributes, colours from app.css (the
 * `state-*` classes).
 */
import { JobState, JobView, type Job, type ListJobsResponse } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client, type ApiProblem } from "../api.js";
import { ErrorNotice } from "../components.js";
import { stateLabel, stateName } from "../format.js";
import { jobHref, jobsHref } from "../router.js";

/** Nodes drawn on each side; the rest are counted and linked to the jobs view. */
export const MAX_NODES_PER_SIDE = 20;

const WIDTH = 900;
const NODE_W = 250;
const NODE_H = 46;
const PITCH = 56;
const TOP = 24;
const COLUMNS = { left: 0, center: (WIDTH - NODE_W) / 2, right: WIDTH - NODE_W } as const;
const ARROW = 8;
/** A task name longer than this is cut (its full name is in the tooltip). */
const TASK_CHARS = 28;

export interface RelatedJobs {
  dependencies: ListJobsResponse;
  dependents: ListJobsResponse;
}

export function loadRelated(jobId: string, signal: AbortSignal): Promise<RelatedJobs> {
  const page = { pageSize: MAX_NODES_PER_SIDE, view: JobView.BASIC };
  return Promise.all([
    client.listJobs({ ...page, dependenciesOf: jobId }, { signal }),
    client.listJobs({ ...page, dependentsOf: jobId }, { signal }),
  ]).then(([dependencies, dependents]) => ({ dependencies, dependents }));
}

/** True when `jobId` is drawn in the graph (its events change what it shows). */
export function isDrawn(related: RelatedJobs | undefined, jobId: string): boolean {
  return related !== undefined && [...related.dependencies.jobs, ...related.dependents.jobs].some((j) => j.id === jobId);
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** What a WAITING job waits on, from its counts (its failure policy is not on the Job). */
export function waitingSentence(job: Job): string {
  const { total = 0, completed = 0, failed = 0, pending = 0 } = job.dependencyCounts ?? {};
  const left = total - completed;
  const of = `${left} of ${plural(total, "dependency", "dependencies")}`;
  if (failed === 0) return `Waiting for ${of} to complete.`;
  // With pending at 0 only the wait policy keeps it WAITING, and only a dead dependency does (a cancelled one would have cancelled it).
  if (pending === 0)
    return `Waiting for ${of}: ${failed === 1 ? "it is dead and holds" : "they are dead and hold"} this job until redriven and completed.`;
  return (
    `Waiting for ${of}: ${pending} not finished yet, ${failed} failed (dead or cancelled). ` +
    "A dead dependency holds this job until redriven, unless the job ignores failed dependencies."
  );
}

export function DependencySection({
  job,
  related,
  error,
  onRetry,
}: {
  job: Job;
  related: RelatedJobs | undefined;
  error: ApiProblem | undefined;
  onRetry: () => void;
}) {
  const hasDependencies = job.dependsOn.length > 0;
  if (!hasDependencies && (related === undefined || related.dependents.jobs.length === 0) && error === undefined) return null;
  const counts = job.dependencyCounts;
  return (
    <section aria-labelledby="dependencies-title" data-testid="dependencies">
      <h2 id="dependencies-title">Dependencies</h2>
      {hasDependencies && counts !== undefined && (
        <p class="dependency-summary" data-testid="dependency-counts">
          {plural(counts.total, "dependency", "dependencies")}: {counts.completed} completed, {counts.failed} failed (dead or cancelled),{" "}
          {counts.pending} pending.
        </p>
      )}
      {job.state === JobState.WAITING && (
        <p class="dependency-summary" data-testid="waiting-on">
          {waitingSentence(job)}
        </p>
      )}
      {error && <ErrorNotice problem={error} what="the job's dependencies and dependents" onRetry={onRetry} />}
      {related === undefined ? !error && <p class="muted">Loading…</p> : <DependencyGraph job={job} related={related} />}
    </section>
  );
}

interface Side {
  jobs: readonly Job[];
  /** Jobs not drawn: a count (0: none), or "some" (dependents: ListJobs counts nothing). */
  more: number | "some";
  moreHref: string;
}

function DependencyGraph({ job, related }: { job: Job; related: RelatedJobs }) {
  const deps = related.dependencies;
  const left: Side = {
    jobs: deps.jobs,
    // depends_on names every dependency; one no longer stored (pruned) is not listed.
    more: deps.nextPageToken === "" ? 0 : Math.max(job.dependsOn.length - deps.jobs.length, 1),
    moreHref: jobsHref({ dependenciesOf: job.id }),
  };
  const right: Side = {
    jobs: related.dependents.jobs,
    more: related.dependents.nextPageToken === "" ? 0 : "some",
    moreHref: jobsHref({ dependentsOf: job.id }),
  };
  const rowsOf = (side: Side) => side.jobs.length + (side.more === 0 ? 0 : 1);
  const rows = Math.max(rowsOf(left), rowsOf(right), 1);
  const height = TOP + (rows - 1) * PITCH + NODE_H;
  const centerY = TOP + ((rows - 1) * PITCH) / 2;
  const rowY = (i: number) => TOP + i * PITCH;
  const mid = NODE_H / 2;

  const unstored = deps.nextPageToken === "" ? job.dependsOn.length - deps.jobs.length : 0;
  const label =
    `Dependency graph of job ${job.id}: ${plural(job.dependsOn.length, "dependency", "dependencies")}, ` +
    `${right.more === 0 ? right.jobs.length : `more than ${right.jobs.length}`} dependents`;

  return (
    <figure class="dependency-graph">
      {/* 2 units around the drawing: the nodes' borders. */}
      <svg viewBox={`-2 -2 ${WIDTH + 4} ${height + 4}`} role="group" aria-label={label} data-testid="dependency-graph">
        <defs>
          <marker
            id="dependency-arrow"
            viewBox={`0 0 ${ARROW} ${ARROW}`}
            refX={ARROW}
            refY={ARROW / 2}
            markerWidth={ARROW}
            markerHeight={ARROW}
            markerUnits="userSpaceOnUse"
            orient="auto"
          >
            <path d={`M0,0 L${ARROW},${ARROW / 2} L0,${ARROW} z`} />
          </marker>
        </defs>
        <text class="side" x={COLUMNS.left} y={14}>
          Depends on
        </text>
        <text class="side" x={COLUMNS.center} y={14}>
          This job
        </text>
        <text class="side" x={COLUMNS.right} y={14}>
          Needed by
        </text>
        {left.jobs.map((_, i) => (
          <Edge key={`l${i}`} x1={COLUMNS.left + NODE_W} y1={rowY(i) + mid} x2={COLUMNS.center} y2={centerY + mid} />
        ))}
        {right.jobs.map((_, i) => (
          <Edge key={`r${i}`} x1={COLUMNS.center + NODE_W} y1={centerY + mid} x2={COLUMNS.right} y2={rowY(i) + mid} />
        ))}
        {left.jobs.map((j, i) => (
          <Node key={j.id} job={j} x={COLUMNS.left} y={rowY(i)} side="dependency" />
        ))}
        <Node job={job} x={COLUMNS.center} y={centerY} side="center" />
        {right.jobs.map((j, i) => (
          <Node key={j.id} job={j} x={COLUMNS.right} y={rowY(i)} side="dependent" />
        ))}
        <More side={left} x={COLUMNS.left} y={rowY(left.jobs.length)} what="dependencies" />
        <More side={right} x={COLUMNS.right} y={rowY(right.jobs.length)} what="dependents" />
      </svg>
      {(job.dependsOn.length === 0 || right.jobs.length === 0 || unstored > 0) && (
        <figcaption class="muted">
          {job.dependsOn.length === 0 && "It depends on no job. "}
          {right.jobs.length === 0 && "No job depends on it. "}
          {unstored > 0 && `${plural(unstored, "dependency is", "dependencies are")} no longer stored (pruned after finishing).`}
        </figcaption>
      )}
    </figure>
  );
}

/** A curve from one node's right side to the next column's node, arrowed at the job that waits. */
function Edge({ x1, y1, x2, y2 }: { x1: number; y1: number; x2: number; y2: number }) {
  const bend = (x2 - x1) / 2;
  return <path class="edge" d={`M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`} marker-end="url(#dependency-arrow)" />;
}

function Node({ job, x, y, side }: { job: Job; x: number; y: number; side: "dependency" | "center" | "dependent" }) {
  const name = stateName(job.state);
  const task = job.task.length > TASK_CHARS ? `${job.task.slice(0, TASK_CHARS - 1)}…` : job.task;
  const what = side === "dependency" ? "Dependency" : side === "dependent" ? "Dependent" : "This job";
  const body = (
    <>
      <title>{`${what}: ${job.task} in ${job.queue}, ${stateLabel(job.state)}, job ${job.id}`}</title>
      <rect class="box" x={x} y={y} width={NODE_W} height={NODE_H} rx={6} />
      <rect class="band" x={x} y={y} width={6} height={NODE_H} rx={3} />
      <text class="task" x={x + 16} y={y + 19}>
        {task}
      </text>
      <text class="state" x={x + 16} y={y + 37}>
        {stateLabel(job.state)} · …{job.id.slice(-8)}
      </text>
    </>
  );
  if (side === "center") {
    return (
      <g class={`node center state-${name}`} data-job-id={job.id} data-state={name} data-side={side}>
        {body}
      </g>
    );
  }
  return (
    <a
      class={`node state-${name}`}
      href={jobHref(job.id)}
      data-job-id={job.id}
      data-state={name}
      data-side={side}
      aria-label={`${what} ${job.task}, ${stateLabel(job.state)}, job ${job.id}`}
    >
      {body}
    </a>
  );
}

function More({ side, x, y, what }: { side: Side; x: number; y: number; what: string }) {
  if (side.more === 0) return null;
  return (
    <a class="more" href={side.moreHref} data-testid={`more-${what}`}>
      <text x={x + 16} y={y + 24}>
        {side.more === "some" ? `and more: all ${what}…` : `and ${side.more} more: all ${what}…`}
      </text>
    </a>
  );
}
