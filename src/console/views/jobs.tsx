/**
 * #/jobs : recent jobs, newest first, filtered by queue, group and state, and
 * to one job's dependencies or dependents, one page at a time.
 */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { JobState } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client } from "../api.js";
import { ErrorNotice, NoJobsYet, StateBadge, Time } from "../components.js";
import { stateFromName, STATES } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { groupsHref, jobHref, jobsHref, queueHref, type JobsFilter } from "../router.js";
import { RedriveAllControl } from "./queue-controls.js";

const PAGE_SIZE = 25;
const JOBS_REFRESH_MS = 500;

/**
 * Page tokens are opaque and only lead forward; this remembers, per token,
 * the token of the page before it, so "Previous page" works (also with the
 * browser's back and forward buttons) for pages reached in this tab.
 */
const previousPage = new Map<string, string>();

export function Jobs({ queue, group, state, dependenciesOf, dependentsOf, page }: JobsFilter) {
  const stateFilter = stateFromName(state);
  const jobs = useResource(
    (signal) =>
      client.listJobs(
        {
          queue,
          groupKey: group,
          states: stateFilter === undefined ? [] : [stateFilter],
          dependenciesOf,
          dependentsOf,
          pageSize: PAGE_SIZE,
          pageToken: page,
        },
        { signal },
      ),
    [queue, group, state, dependenciesOf, dependentsOf, page],
  );
  const queues = useResource((signal) => client.getStats({}, { signal }), []);
  const refresh = useThrottled(jobs.reload, JOBS_REFRESH_MS);
  useLive((signal) => {
    if (signal.kind === "resync") return refresh();
    const event = signal.event;
    // The first page shows new jobs and moves; later pages only change state.
    const touchesPage =
      page === ""
        ? (queue === "" || event.queue === queue) && (group === "" || event.groupKey === group)
        : jobs.data?.jobs.some((j) => j.id === event.jobId);
    if (touchesPage) refresh();
  });

  const related = { dependenciesOf, dependentsOf };
  const isRelated = dependenciesOf !== "" || dependentsOf !== "";
  const filtered = queue !== "" || group !== "" || stateFilter !== undefined || isRelated;
  const data = jobs.data;
  const previous = page === "" ? undefined : previousPage.get(page);

  // The form edits a draft; the table follows the URL once "Show" is pressed.
  // A new URL resets it, but mounting does not: the effect runs after the
  // first paint, and would undo what was typed in between.
  const [draft, setDraft] = useState({ queue, group, state: stateFilter === undefined ? "" : state });
  const routeKey = `${queue}\0${group}\0${state}`;
  const draftFor = useRef(routeKey);
  useEffect(() => {
    if (draftFor.current === routeKey) return;
    draftFor.current = routeKey;
    setDraft({ queue, group, state: stateFilter === undefined ? "" : state });
  }, [routeKey]);
  const onFilter = (e: TargetedSubmitEvent<HTMLFormElement>): void => {
    e.preventDefault();
    location.hash = jobsHref({ ...draft, group: draft.group.trim(), ...related });
  };

  const queueNames = new Set(queues.data?.queues.map((q) => q.queue) ?? []);
  if (queue !== "") queueNames.add(queue);

  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs</h1>
      {isRelated && (
        <p class="links" data-testid="related-filter">
          {dependenciesOf !== "" && (
            <span>
              Only the jobs that job{" "}
              <a class="mono" href={jobHref(dependenciesOf)}>
                {dependenciesOf}
              </a>{" "}
              depends on.
            </span>
          )}
          {dependentsOf !== "" && (
            <span>
              Only the jobs that depend on job{" "}
              <a class="mono" href={jobHref(dependentsOf)}>
                {dependentsOf}
              </a>
              .
            </span>
          )}
          <a href={jobsHref({ queue, group, state })}>Show all jobs</a>
        </p>
      )}
      <form class="filters" onSubmit={onFilter} aria-label="Filter jobs">
        <div class="field">
          <label for="filter-queue">Queue</label>
          <select id="filter-queue" name="queue" value={draft.queue} onChange={(e) => setDraft({ ...draft, queue: e.currentTarget.value })}>
            <option value="">All queues</option>
            {[...queueNames].sort().map((name) => (
              <option value={name} key={name}>
                {name}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-group">Group</label>
          <input
            id="filter-group"
            type="text"
            name="group"
            placeholder="Any group"
            autoComplete="off"
            spellcheck={false}
            maxLength={128}
            value={draft.group}
            onInput={(e) => setDraft({ ...draft, group: e.currentTarget.value })}
          />
        </div>
        <div class="field">
          <label for="filter-state">State</label>
          <select id="filter-state" name="state" value={draft.state} onChange={(e) => setDraft({ ...draft, state: e.currentTarget.value })}>
            <option value="">All states</option>
            {STATES.map((s) => (
              <option value={s.name} key={s.name}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        <button type="submit">Show</button>
        {filtered && (
          <a class="clear" href={jobsHref()}>
            Clear filters
          </a>
        )}
        {queue !== "" && <a href={queueHref(queue)}>Activity of {queue}</a>}
        {queue !== "" && <a href={groupsHref(queue)}>Groups of {queue}</a>}
      </form>

      {/* RedriveAll takes the whole queue: not offered under a group or job filter, whose table shows only some of its dead jobs. */}
      {queue !== "" && group === "" && !isRelated && stateFilter === JobState.DEAD && page === "" && (
        <RedriveAllControl key={queue} queue={queue} onChanged={jobs.reload} />
      )}
      {jobs.error && <ErrorNotice problem={jobs.error} what="jobs" onRetry={jobs.reload} />}
      {data === undefined ? (
        !jobs.error && <p class="muted">Loading…</p>
      ) : data.jobs.length === 0 ? (
        filtered || page !== "" ? (
          <p class="empty" data-testid="no-matching-jobs">
            No {stateFilter === undefined ? "" : `${state} `}jobs{queue === "" ? "" : ` in queue ${queue}`}
            {group === "" ? "" : ` of group ${group}`}
            {dependenciesOf === "" ? "" : ` that job ${dependenciesOf} depends on`}
            {dependentsOf === "" ? "" : ` that depend on job ${dependentsOf}`}. <a href={jobsHref()}>Show all jobs</a>
          </p>
        ) : (
          <NoJobsYet />
        )
      ) : (
        <div class="table-wrap">
          <table class="jobs" data-testid="jobs-table">
            <caption>{filtered ? "Jobs matching the filter" : "All jobs"}, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Queue</th>
                <th scope="col">Group</th>
                <th scope="col">Task</th>
                <th scope="col">State</th>
                <th scope="col" class="num">
                  Attempts
                </th>
                <th scope="col">Created</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {data.jobs.map((job) => (
                <tr key={job.id} data-job-id={job.id}>
                  <td>
                    <a class="mono" href={jobHref(job.id)}>
                      {job.id}
                    </a>
                  </td>
                  <td>{job.queue}</td>
                  <td data-field="group">
                    {job.groupKey === "" ? (
                      <span class="muted">—</span>
                    ) : (
                      <a class="mono" href={jobsHref({ queue: job.queue, group: job.groupKey })}>
                        {job.groupKey}
                      </a>
                    )}
                  </td>
                  <td>{job.task}</td>
                  <td>
                    <StateBadge state={job.state} />
                  </td>
                  <td class="num">
                    {job.attempts} / {job.maxAttempts}
                  </td>
                  <td>
                    <Time ts={job.createTime} compact />
                  </td>
                  <td>
                    <Time ts={job.updateTime} compact />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      {data !== undefined && (page !== "" || data.nextPageToken !== "") && (
        <nav class="pager" aria-label="Pages">
          {page !== "" && <a href={jobsHref({ queue, group, state, ...related })}>First page</a>}
          {previous !== undefined && previous !== "" && (
            <a href={jobsHref({ queue, group, state, ...related, page: previous })}>Previous page</a>
          )}
          {data.nextPageToken !== "" && (
            <a
              href={jobsHref({ queue, group, state, ...related, page: data.nextPageToken })}
              onClick={() => previousPage.set(data.nextPageToken, page)}
            >
              Next page
            </a>
          )}
        </nav>
      )}
    </section>
  );
}
