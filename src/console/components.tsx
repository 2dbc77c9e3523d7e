/** Pieces every view uses: states, times, errors, empty states, live status. */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { JobState } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { ApiProblem } from "./api.js";
import { formatTime, formatTimeCompact, isoTime, stateLabel, stateName } from "./format.js";
import { useLiveStatus } from "./hooks.js";
import { POLL_INTERVAL_MS } from "./live.js";

export function StateBadge({ state }: { state: JobState }) {
  return <span class={`badge state-${stateName(state)}`}>{stateLabel(state)}</span>;
}

/** A timestamp in UTC; `compact` drops today's date (the full time is in the tooltip). */
export function Time({ ts, compact = false }: { ts: Timestamp | undefined; compact?: boolean }) {
  if (ts === undefined) return <span class="muted">—</span>;
  return (
    <time dateTime={isoTime(ts)} title={formatTime(ts)}>
      {compact ? formatTimeCompact(ts) : formatTime(ts)}
    </time>
  );
}

/** A failed load: "server unreachable", or the API's code and message. */
export function ErrorNotice({ problem, what, onRetry }: { problem: ApiProblem; what: string; onRetry: () => void }) {
  if (problem.unreachable) {
    return (
      <div class="notice error" role="alert" data-testid="unreachable">
        <h2>Server unreachable</h2>
        <p>
          The console cannot reach the LeaseQueue server at <code>{location.origin}</code> ({problem.message}). Check that it is running;
          this page keeps retrying.
        </p>
        <button type="button" onClick={onRetry}>
          Retry now
        </button>
      </div>
    );
  }
  return (
    <div class="notice error" role="alert">
      <p>
        Could not load {what}: <code>{problem.code}</code> {problem.message}
      </p>
      <button type="button" onClick={onRetry}>
        Retry
      </button>
    </div>
  );
}

/** No job exists at all: say how to submit one. */
export function NoJobsYet() {
  const curl = [
    `curl -s ${location.origin}/leasequeue.v1.LeaseQueueService/Submit \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '{"queue":"default","task":"hello.world","payload":{"hello":"world"}}'`,
  ].join("\n");
  return (
    <div class="empty" data-testid="no-jobs">
      <h2>No jobs yet</h2>
      <p>Submit one and it appears here at once:</p>
      <pre>
        <code>{curl}</code>
      </pre>
    </div>
  );
}

export function LiveIndicator() {
  const status = useLiveStatus();
  const text = status.mode === "live" ? "Live" : status.mode === "connecting" ? "Connecting…" : "Polling";
  return (
    <p class={`live live-${status.mode}`} data-live-mode={status.mode} title="Live updates from WatchEvents">
      <span class="dot" aria-hidden="true" />
      {text}
    </p>
  );
}

export function LiveBanner() {
  const status = useLiveStatus();
  return (
    <div role="status" class="banner-slot">
      {status.mode === "degraded" && (
        <p class="banner warn" data-testid="live-degraded">
          Live updates unavailable, refreshing every {POLL_INTERVAL_MS / 1000} s ({status.reason}). Reconnecting in{" "}
          {Math.max(1, Math.round(status.retryInMs / 1000))} s, then with backoff.
        </p>
      )}
    </div>
  );
}
