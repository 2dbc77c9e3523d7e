/**
 * #/ : every queue with its counts per state and its oldest pending job's
 * age and its limits, links to its activity charts and its groups, and the
 * operator's controls of each queue: pause or resume, limits, purge.
 */
import { useState } from "preact/hooks";
import { formatDurationText } from "../../domain/duration-text.js";
import type { QueueStats } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client } from "../api.js";
import { ErrorNotice, NoJobsYet } from "../components.js";
import { durationMs, formatCount, STATES } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { groupsHref, jobsHref, queueHref } from "../router.js";
import { describeLimits, hasLimits, LimitsForm, OutcomeLine, PauseButton, PurgeForm, type Outcome } from "./queue-controls.js";

/** Stats are refetched at most this often while events stream in. */
const STATS_REFRESH_MS = 1_000;

/** QueueStats' count of each of STATES, by its name. */
type CountField = "waiting" | "queued" | "running" | "retry" | "completed" | "dead" | "cancelled";

export function Overview() {
  const stats = useResource((signal) => client.getStats({}, { signal }), []);
  const refresh = useThrottled(stats.reload, STATS_REFRESH_MS);
  useLive(refresh);
  const [outcome, setOutcome] = useState<Outcome | undefined>();
  const [purging, setPurging] = useState<string | undefined>();
  const [limiting, setLimiting] = useState<string | undefined>();
  const onOutcome = (o: Outcome): void => {
    setOutcome(o);
    stats.reload();
  };
  const controls: RowControls = {
    onOutcome,
    onPurge: (queue) => {
      setOutcome(undefined);
      setLimiting(undefined);
      setPurging(queue);
    },
    onLimits: (queue) => {
      setOutcome(undefined);
      setPurging(undefined);
      setLimiting(queue);
    },
  };

  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Queues</h1>
      {stats.error && <ErrorNotice problem={stats.error} what="queue statistics" onRetry={stats.reload} />}
      {stats.data === undefined ? (
        !stats.error && <p class="muted">Loading…</p>
      ) : stats.data.queues.length === 0 ? (
        <NoJobsYet />
      ) : (
        <div class="table-wrap">
          <table class="stats" data-testid="queue-stats">
            <caption>
              Jobs per queue and state; waiting jobs wait for their dependencies to complete. Oldest pending: how long the longest-waiting
              eligible job (queued or retry) has waited to be claimed.
            </caption>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                {STATES.map((s) => (
                  <th scope="col" class="num" key={s.name}>
                    {s.label}
                  </th>
                ))}
                <th scope="col" class="num">
                  Oldest pending
                </th>
                <th scope="col">Controls</th>
              </tr>
            </thead>
            <tbody>
              {stats.data.queues.map((q) => (
                <StatsRow key={q.queue} stats={q} controls={controls} />
              ))}
            </tbody>
            {stats.data.total && stats.data.queues.length > 1 && (
              <tfoot>
                <StatsRow stats={stats.data.total} />
              </tfoot>
            )}
          </table>
        </div>
      )}
      {purging !== undefined && <PurgeForm key={purging} queue={purging} onOutcome={onOutcome} onClose={() => setPurging(undefined)} />}
      {limiting !== undefined && (
        <LimitsForm
          key={limiting}
          queue={limiting}
          current={stats.data?.queues.find((q) => q.queue === limiting)?.config}
          onOutcome={onOutcome}
          onClose={() => setLimiting(undefined)}
        />
      )}
      <OutcomeLine outcome={outcome} />
    </section>
  );
}

interface RowControls {
  onOutcome: (o: Outcome) => void;
  onPurge: (queue: string) => void;
  onLimits: (queue: string) => void;
}

/** One queue's row; the totals row (`controls` absent) has no controls. */
function StatsRow({ stats, controls }: { stats: QueueStats; controls?: RowControls }) {
  const queue = stats.queue;
  const pending = stats.queued + stats.retry;
  return (
    <tr data-queue={queue || undefined} data-paused={queue === "" ? undefined : String(stats.paused)}>
      <th scope="row">
        {queue === "" ? (
          "All queues"
        ) : (
          <>
            <a href={jobsHref({ queue })}>{queue}</a>
            <a class="row-link" href={queueHref(queue)} aria-label={`Activity of queue ${queue}`}>
              activity
            </a>
            <a class="row-link" href={groupsHref(queue)} aria-label={`Groups of queue ${queue}`}>
              groups
            </a>
            {stats.paused && (
              <span class="badge paused" title="Paused: hands out no leases until resumed">
                Paused
              </span>
            )}
            {hasLimits(stats.config) && (
              <span
                class="badge limited"
                data-testid="queue-limits"
                title="Limits and group rules, across every worker and server (UpdateQueue)"
              >
                {describeLimits(stats.config)}
              </span>
            )}
          </>
        )}
      </th>
      {STATES.map(({ name }) => {
        const n = stats[name as CountField];
        return (
          <td class="num" key={name} data-state={name}>
            {n === 0n ? <span class="muted">0</span> : <a href={jobsHref({ queue, state: name })}>{formatCount(n)}</a>}
          </td>
        );
      })}
      <td class="num">
        {pending === 0n ? <span class="muted">—</span> : formatDurationText(durationMs(stats.oldestPendingAge), "glance")}
      </td>
      <td>
        {controls && (
          <div class="buttons compact">
            <PauseButton queue={queue} paused={stats.paused} onOutcome={controls.onOutcome} />
            <button type="button" class="quiet" aria-label={`Limits of queue ${queue}`} onClick={() => controls.onLimits(queue)}>
              Limits…
            </button>
            <button type="button" class="quiet" aria-label={`Purge queue ${queue}`} onClick={() => controls.onPurge(queue)}>
              Purge…
            </button>
          </div>
        )}
      </td>
    </tr>
  );
}
