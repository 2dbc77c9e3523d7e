/**
 * #/queues/<queue>/groups : the groups of one queue that have unfinished
 * jobs (docs/api.md "Groups", ListGroups: queued, running and retry counts
 * per group_key, and the earliest schedule_time of its queued and retry
 * jobs), largest backlog first. Each group links to its jobs. The list
 * follows the live feed: an event of a grouped job of the queue reloads it.
 */
import type { GroupStats } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client } from "../api.js";
import { ErrorNotice } from "../components.js";
import { formatCount, formatRelativeTime, formatTime, isoTime } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { jobsHref, queueHref } from "../router.js";

/** ListGroups' largest page. */
export const GROUPS_PAGE_SIZE = 1000;
/** At most this many pages are read per load: 10,000 groups. */
export const GROUPS_MAX_PAGES = 10;
/**
 * A load reads up to GROUPS_MAX_PAGES pages, each costing about as much as
 * its groups' open jobs: refetched at most this often while events stream in.
 */
const GROUPS_REFRESH_MS = 2_000;

const COUNT_FIELDS = ["queued", "running", "retry"] as const;

/** Largest backlog (queued + retry) first, then most running; ties keep the server's group_key order. */
export function byBacklog(a: GroupStats, b: GroupStats): number {
  const backlog = b.queued + b.retry - (a.queued + a.retry);
  if (backlog !== 0n) return backlog > 0n ? 1 : -1;
  const running = b.running - a.running;
  return running === 0n ? 0 : running > 0n ? 1 : -1;
}

interface GroupList {
  groups: GroupStats[];
  /** More groups exist past the GROUPS_MAX_PAGES pages read (in group_key order). */
  capped: boolean;
}

async function loadGroups(queue: string, signal: AbortSignal): Promise<GroupList> {
  const groups: GroupStats[] = [];
  let pageToken = "";
  for (let page = 0; page < GROUPS_MAX_PAGES; page++) {
    const res = await client.listGroups({ queue, pageSize: GROUPS_PAGE_SIZE, pageToken }, { signal });
    for (const g of res.groups) groups.push(g);
    pageToken = res.nextPageToken;
    if (pageToken === "") break;
  }
  // Array.prototype.sort is stable: equal backlogs stay in group_key order.
  return { groups: groups.sort(byBacklog), capped: pageToken !== "" };
}

export function Groups({ queue }: { queue: string }) {
  const list = useResource((signal) => loadGroups(queue, signal), [queue]);
  const refresh = useThrottled(list.reload, GROUPS_REFRESH_MS);
  useLive((signal) => {
    if (signal.kind === "resync" || (signal.event.queue === queue && signal.event.groupKey !== "")) refresh();
  });
  const data = list.data;

  return (
    <section aria-labelledby="groups-title">
      <h1 id="groups-title">
        Groups of queue <span class="mono">{queue}</span>
      </h1>
      <p class="links">
        <a href={jobsHref({ queue })}>Jobs of {queue}</a>
        <a href={queueHref(queue)}>Activity of {queue}</a>
        <a href="#/">All queues</a>
      </p>
      {list.error && <ErrorNotice problem={list.error} what="the groups" onRetry={list.reload} />}
      {data === undefined ? (
        !list.error && <p class="muted">Loading…</p>
      ) : data.groups.length === 0 ? (
        <p class="empty" data-testid="no-groups">
          No group of queue {queue} has queued, running or retry jobs. Jobs submitted with a <code>groupKey</code> are counted here by group
          until they finish.
        </p>
      ) : (
        <>
          {data.capped && (
            <p class="notice" role="note" data-testid="groups-capped">
              Showing the first {formatCount(BigInt(data.groups.length))} groups by group key, sorted among themselves: the queue has more,
              and those are not shown, however large their backlog.
            </p>
          )}
          <div class="table-wrap">
            <table class="groups" data-testid="groups-table">
              <caption>
                {formatCount(BigInt(data.groups.length))} {data.groups.length === 1 ? "group" : "groups"} with unfinished jobs, largest
                backlog (queued + retry) first, then most running; jobs without a group are not listed. Oldest pending: the earliest time a
                queued or retry job of the group is eligible from.
              </caption>
              <thead>
                <tr>
                  <th scope="col">Group</th>
                  <th scope="col" class="num">
                    Queued
                  </th>
                  <th scope="col" class="num">
                    Running
                  </th>
                  <th scope="col" class="num">
                    Retry
                  </th>
                  <th scope="col" class="num">
                    Oldest pending
                  </th>
                </tr>
              </thead>
              <tbody>
                {data.groups.map((g) => (
                  <GroupRow key={g.groupKey} queue={queue} group={g} />
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

function GroupRow({ queue, group: g }: { queue: string; group: GroupStats }) {
  const group = g.groupKey;
  return (
    <tr data-group={group}>
      <th scope="row">
        <a class="mono" href={jobsHref({ queue, group })}>
          {group}
        </a>
      </th>
      {COUNT_FIELDS.map((state) => {
        const n = g[state];
        return (
          <td class="num" key={state} data-state={state}>
            {n === 0n ? <span class="muted">0</span> : <a href={jobsHref({ queue, group, state })}>{formatCount(n)}</a>}
          </td>
        );
      })}
      <td class="num" data-field="oldest-pending">
        {g.oldestPendingTime === undefined ? (
          <span class="muted">—</span>
        ) : (
          <time dateTime={isoTime(g.oldestPendingTime)} title={formatTime(g.oldestPendingTime)}>
            {formatRelativeTime(g.oldestPendingTime)}
          </time>
        )}
      </td>
    </tr>
  );
}
