/**
 * Hash routing, so the server serves one page and no routes:
 *   #/                                   queues overview
 *   #/jobs?queue=billing&group=tenant-a&state=dead&page=<token>   jobs table
 *   #/jobs?dependenciesOf=<job id>  (or dependentsOf)   a job's dependencies (dependents)
 *   #/jobs/<job id>                      one job
 *   #/queues/<queue>                     a queue's activity (charts of its last hour)
 *   #/queues/<queue>/groups              a queue's groups
 *   #/schedules                          schedules
 */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { name: "overview" }
  | ({ name: "jobs" } & JobsFilter)
  | { name: "job"; id: string }
  | { name: "queue"; queue: string }
  | { name: "groups"; queue: string }
  | { name: "schedules" }
  | { name: "unknown"; path: string };

/** The jobs view's filters; "" is none. */
export interface JobsFilter {
  queue: string;
  group: string;
  state: string;
  /** Only the jobs this job depends on (ListJobs' dependencies_of). */
  dependenciesOf: string;
  /** Only the jobs that depend on this job. */
  dependentsOf: string;
  page: string;
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?", 2) as [string, string?];
  const params = new URLSearchParams(query);
  if (path === "/" || path === "") return { name: "overview" };
  if (path === "/jobs" || path === "/jobs/") {
    return {
      name: "jobs",
      queue: params.get("queue") ?? "",
      group: params.get("group") ?? "",
      state: params.get("state") ?? "",
      dependenciesOf: params.get("dependenciesOf") ?? "",
      dependentsOf: params.get("dependentsOf") ?? "",
      page: params.get("page") ?? "",
    };
  }
  if (path === "/schedules" || path === "/schedules/") return { name: "schedules" };
  const job = /^\/jobs\/([^/]+)$/.exec(path);
  if (job) return { name: "job", id: safeDecode(job[1]) };
  const groups = /^\/queues\/([^/]+)\/groups\/?$/.exec(path);
  if (groups) return { name: "groups", queue: safeDecode(groups[1]) };
  const queue = /^\/queues\/([^/]+)\/?$/.exec(path);
  if (queue) return { name: "queue", queue: safeDecode(queue[1]) };
  return { name: "unknown", path };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function jobsHref(filter: Partial<JobsFilter> = {}): string {
  const params = new URLSearchParams();
  if (filter.queue) params.set("queue", filter.queue);
  if (filter.group) params.set("group", filter.group);
  if (filter.state) params.set("state", filter.state);
  if (filter.dependenciesOf) params.set("dependenciesOf", filter.dependenciesOf);
  if (filter.dependentsOf) params.set("dependentsOf", filter.dependentsOf);
  if (filter.page) params.set("page", filter.page);
  const query = params.toString();
  return query === "" ? "#/jobs" : `#/jobs?${query}`;
}

export function jobHref(id: string): string {
  return `#/jobs/${encodeURIComponent(id)}`;
}

export function queueHref(queue: string): string {
  return `#/queues/${encodeURIComponent(queue)}`;
}

export function groupsHref(queue: string): string {
  return `#/queues/${encodeURIComponent(queue)}/groups`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const onChange = (): void => setRoute(parseHash(location.hash));
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}
