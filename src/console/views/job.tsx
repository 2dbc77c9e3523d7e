/**
 * #/jobs/<id> : one job, its progress, its dependencies and dependents, its
 * attempts drawn to scale and its event timeline, and the operator's actions
 * on it. The page refetches on every live event of the job or of a job its
 * graph draws, so a worker's progress (a PROGRESS event, stored at most once
 * a second per job: docs/api.md "Snooze and progress") shows as it is
 * reported, and a dependency's end as it happens.
 */
import type { TargetedSubmitEvent } from "preact";
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { formatDurationText } from "../../domain/duration-text.js";
import { JobState, type Job } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client, describeError } from "../api.js";
import { ErrorNotice, StateBadge, Time } from "../components.js";
import { durationMs, formatCompactValue, formatValue, kindLabel, stateLabel } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { jobsHref } from "../router.js";
import { AttemptTimeline } from "./attempt-timeline.js";
import { DependencySection, isDrawn, loadRelated } from "./dependency-graph.js";

const JOB_REFRESH_MS = 250;

export function JobPage({ id }: { id: string }) {
  const res = useResource(
    async (signal) => {
      const [job, events] = await Promise.all([client.getJob({ jobId: id }, { signal }), client.listJobEvents({ jobId: id }, { signal })]);
      return { job: job.job!, events: events.events };
    },
    [id],
  );
  const related = useResource((signal) => loadRelated(id, signal), [id]);
  const reload = (): void => {
    res.reload();
    related.reload();
  };
  const refresh = useThrottled(reload, JOB_REFRESH_MS);
  useLive((signal) => {
    if (signal.kind === "resync" || signal.event.jobId === id || isDrawn(related.data, signal.event.jobId)) refresh();
  });

  const heading = (
    <h1 id="job-title">
      Job <span class="mono">{id}</span>
    </h1>
  );
  if (res.data === undefined) {
    const problem = res.error;
    return (
      <section aria-labelledby="job-title">
        {heading}
        {problem === undefined ? (
          <p class="muted">Loading…</p>
        ) : problem.code === "not_found" ? (
          <p class="notice" role="alert">
            No job has this id. It may have been pruned. <a href={jobsHref()}>Back to the jobs</a>
          </p>
        ) : problem.code === "invalid_argument" ? (
          <p class="notice" role="alert">
            This is not a job id: {problem.message}. <a href={jobsHref()}>Back to the jobs</a>
          </p>
        ) : (
          <ErrorNotice problem={problem} what="the job" onRetry={res.reload} />
        )}
      </section>
    );
  }

  const { job, events } = res.data;
  return (
    <section aria-labelledby="job-title" data-job-state={JobState[job.state]}>
      {heading}
      {res.error && <ErrorNotice problem={res.error} what="the job" onRetry={res.reload} />}
      <dl class="facts">
        <dt>State</dt>
        <dd data-testid="job-state">
          <StateBadge state={job.state} />
        </dd>
        <dt>Queue</dt>
        <dd>
          <a href={jobsHref({ queue: job.queue })}>{job.queue}</a>
        </dd>
        <dt>Group</dt>
        <dd data-testid="job-group">
          {job.groupKey === "" ? (
            <span class="muted">none</span>
          ) : (
            <a
              class="mono"
              href={jobsHref({ queue: job.queue, group: job.groupKey })}
              title={`Jobs of group ${job.groupKey} in ${job.queue}`}
            >
              {job.groupKey}
            </a>
          )}
        </dd>
        <dt>Task</dt>
        <dd>{job.task}</dd>
        <dt>Priority</dt>
        <dd>{job.priority}</dd>
        <dt>Attempts</dt>
        <dd>
          {job.attempts} of {job.maxAttempts} (retry base delay {formatDurationText(durationMs(job.retryBaseDelay), "glance")})
        </dd>
        <dt>Deliveries</dt>
        <dd>{job.deliveries}</dd>
        <dt>Created</dt>
        <dd>
          <Time ts={job.createTime} />
        </dd>
        <dt>Eligible from</dt>
        <dd>
          <Time ts={job.scheduleTime} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time ts={job.updateTime} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time ts={job.finishTime} />
        </dd>
        <dt>Lease</dt>
        <dd>
          {job.state === JobState.RUNNING ? (
            <>
              held by <span class="mono">{job.workerId}</span> until <Time ts={job.leaseExpireTime} />
            </>
          ) : (
            <span class="muted">none</span>
          )}
        </dd>
        <dt>Progress</dt>
        <dd data-testid="job-progress" aria-live="polite">
          {job.progress === undefined ? (
            <span class="muted">none reported</span>
          ) : (
            <span class="mono progress-value">{formatCompactValue(job.progress)}</span>
          )}
        </dd>
      </dl>

      <Actions
        key={job.id}
        job={job}
        waitedOn={related.data?.dependents.jobs.some((j) => j.state === JobState.WAITING) ?? false}
        onChanged={reload}
      />

      <DependencySection job={job} related={related.data} error={related.error} onRetry={related.reload} />

      <h2>Payload</h2>
      <pre class="json" data-testid="job-payload">
        {formatValue(job.payload)}
      </pre>
      <h2>Result</h2>
      {job.result === undefined ? <p class="muted">No result.</p> : <pre class="json">{formatValue(job.result)}</pre>}
      <h2>Last error</h2>
      {job.lastError === "" ? <p class="muted">None.</p> : <pre class="error-text">{job.lastError}</pre>}

      <h2>Attempts</h2>
      <AttemptTimeline events={events} />

      <h2 id="timeline-title">Timeline</h2>
      <div class="table-wrap">
        <table class="timeline" data-testid="timeline" aria-labelledby="timeline-title">
          <thead>
            <tr>
              <th scope="col" class="num">
                Seq
              </th>
              <th scope="col">Time</th>
              <th scope="col">Event</th>
              <th scope="col">Transition</th>
              <th scope="col">Worker</th>
              <th scope="col" class="num">
                Attempt
              </th>
              <th scope="col">Message</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr key={String(e.sequence)} data-kind={kindLabel(e.kind)}>
                <td class="num">{String(e.sequence)}</td>
                <td>
                  <Time ts={e.eventTime} compact />
                </td>
                <td>{kindLabel(e.kind)}</td>
                <td>
                  {stateLabel(e.fromState)} → {stateLabel(e.toState)}
                </td>
                <td class="mono">{e.workerId}</td>
                <td class="num">{e.attempt || ""}</td>
                <td>{e.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

type Action = "redrive" | "cancel";

/**
 * Redrive (dead jobs) and Cancel (queued, waiting, retry or running jobs: a
 * running one is stopped), each behind a confirmation step. `waitedOn`: a
 * WAITING job depends on this one.
 */
function Actions({ job, waitedOn, onChanged }: { job: Job; waitedOn: boolean; onChanged: () => void }) {
  const [confirming, setConfirming] = useState<Action | undefined>();
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>();
  const [reason, setReason] = useState("");
  const confirmRef = useRef<HTMLButtonElement>(null);
  const canRedrive = job.state === JobState.DEAD;
  const running = job.state === JobState.RUNNING;
  const canCancel = job.state === JobState.QUEUED || job.state === JobState.WAITING || job.state === JobState.RETRY || running;

  // Focused as the confirmation is put in the page, before it paints: an
  // effect would run later and take the focus from a reason already being typed.
  useLayoutEffect(() => {
    if (confirming !== undefined) confirmRef.current?.focus();
  }, [confirming]);

  const ask = (action: Action): void => {
    setOutcome(undefined);
    setConfirming(action);
  };

  const run = async (action: Action): Promise<void> => {
    setBusy(true);
    try {
      const res =
        action === "redrive"
          ? await client.redrive({ jobId: job.id })
          : await client.cancel({ jobId: job.id, reason: reason.trim(), includeRunning: running });
      const state = res.job ? stateLabel(res.job.state) : "changed";
      setOutcome({ ok: true, text: `${action === "redrive" ? "Redriven" : "Cancelled"}: the job is now ${state}.` });
      setReason("");
      onChanged();
    } catch (err) {
      const problem = describeError(err);
      setOutcome({ ok: false, text: `${action === "redrive" ? "Redrive" : "Cancel"} failed: ${problem.code}: ${problem.message}` });
    } finally {
      setBusy(false);
      setConfirming(undefined);
    }
  };

  const onConfirm = (e: TargetedSubmitEvent<HTMLFormElement>): void => {
    e.preventDefault();
    if (confirming) void run(confirming);
  };

  return (
    <section class="actions" aria-labelledby="actions-title">
      <h2 id="actions-title">Actions</h2>
      {confirming === undefined ? (
        <div class="buttons">
          {canRedrive && (
            <button type="button" onClick={() => ask("redrive")}>
              Redrive…
            </button>
          )}
          {canCancel && (
            <button type="button" class="danger" onClick={() => ask("cancel")}>
              Cancel job…
            </button>
          )}
          {!canRedrive && !canCancel && (
            <p class="muted">
              None: only dead jobs can be redriven, and only queued, waiting, retry or running jobs cancelled. This job is{" "}
              {stateLabel(job.state).toLowerCase()}.
            </p>
          )}
        </div>
      ) : (
        <form class="confirm" onSubmit={onConfirm} aria-labelledby="confirm-text" data-testid="confirm">
          <p id="confirm-text">
            {confirming === "redrive"
              ? "Redrive this job? It goes back to Queued with its attempts reset to 0, and workers can claim it at once."
              : running
                ? "Cancel this running job? Its worker is told to stop at once and sends no result; this cannot be undone."
                : "Cancel this job? It will never run; this cannot be undone."}
            {confirming === "cancel" &&
              waitedOn &&
              " The jobs waiting for it are cancelled too, except those submitted to ignore failed dependencies."}
          </p>
          {confirming === "cancel" && (
            <div class="field">
              <label for="cancel-reason">Reason (optional)</label>
              <input
                id="cancel-reason"
                type="text"
                name="reason"
                maxLength={4096}
                value={reason}
                onInput={(e) => setReason(e.currentTarget.value)}
              />
            </div>
          )}
          <div class="buttons">
            <button type="submit" ref={confirmRef} disabled={busy} class={confirming === "cancel" ? "danger" : undefined}>
              {confirming === "redrive" ? "Yes, redrive" : "Yes, cancel the job"}
            </button>
            <button type="button" disabled={busy} onClick={() => setConfirming(undefined)}>
              No, keep it
            </button>
          </div>
        </form>
      )}
      <div role="status" class="outcome-slot">
        {outcome && (
          <p class={outcome.ok ? "outcome ok" : "outcome fail"} data-testid="action-outcome">
            {outcome.text}
          </p>
        )}
      </div>
    </section>
  );
}
