/**
 * Request validation: the "Bounds" and "Defaults and identity" tables of
 * docs/api.md, turning wire requests into domain specs or throwing
 * invalid_argument with a BadRequest that names the field.
 */
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Duration, type FieldMask, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { formatDurationText } from "../domain/duration-text.js";
import type { JobState as DomainState } from "../domain/job.js";
import { isJobId } from "../domain/ids.js";
import { nestedTooDeepText, nestingDepth } from "../domain/json-depth.js";
import { BOUND_TEXTS, BOUNDS, DEFAULTS } from "../domain/request-bounds.js";
import { NO_QUEUE_LIMITS, QUEUE_CONFIG_FIELDS, type QueueConfigField, type QueueConfigUpdate } from "../domain/queue-limits.js";
import { canonicalTimeZone, cronProblem, type Recurrence, type ScheduleSpec } from "../domain/schedule.js";
import type { DependencyPolicy } from "../domain/job.js";
import type { NewJob, NewJobDependencies } from "../domain/submission.js";
import { traceContextOf, type TraceContext } from "../domain/trace-context.js";
import {
  DependencyFailurePolicy,
  JobView,
  type JobState,
  type QueueConfig,
  type Schedule,
  type SubmitRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { invalidArgument, payloadTooLarge, purgeNotConfirmed } from "./errors.js";
import { decodedJsonOf } from "./hand-wire.js";
import { STATE_FROM_WIRE } from "./wire.js";

/** docs/api.md "Bounds" and "Defaults and identity": one table, shared with the state machine and the worker SDK. */
export { BOUNDS, DEFAULTS } from "../domain/request-bounds.js";

export function queueName(field: string, value: string, fallback?: string): string {
  if (value === "" && fallback !== undefined) return fallback;
  if (value === "") throw invalidArgument(field, "is required");
  if (!BOUNDS.name.test(value)) {
    throw invalidArgument(field, `must be ${BOUND_TEXTS.name}`);
  }
  return value;
}

/** An optional name filter (RedriveAll's task): empty means any; otherwise a valid name. */
export function optionalName(field: string, value: string): string | undefined {
  return value === "" ? undefined : queueName(field, value);
}

/** A count limit where 0 means "all" (RedriveAll's limit); never negative. */
export function limitOrAll(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 0) throw invalidArgument(field, "must not be negative (0 means all)");
  return value;
}

/** PurgeQueue's confirmation: it must equal the queue name, else failed_precondition (docs/api.md "Queue controls"). */
export function purgeConfirmation(field: string, value: string, queue: string): void {
  if (value !== queue) throw purgeNotConfirmed(field, queue);
}

/**
 * A job's group (SubmitRequest.group_key, ListJobsRequest.group_key; docs/api.md
 * "Groups"): empty means none (or, as a filter, any); otherwise 1..128 visible
 * ASCII characters, so no spaces.
 */
export function groupKey(field: string, value: string): string {
  if (value !== "" && !BOUNDS.groupKey.test(value)) {
    throw invalidArgument(field, `must be ${BOUND_TEXTS.groupKey}`);
  }
  return value;
}

/**
 * SubmitRequest.trace_context (docs/api.md "Trace context"): null when
 * empty (the call's headers apply then), else traceparent and tracestate in
 * W3C Trace Context syntax, each at most 512 bytes, and no other key.
 */
export function traceContext(field: string, value: Readonly<Record<string, string>>): TraceContext | null {
  const read = traceContextOf(value);
  if ("problem" in read) throw invalidArgument(field, read.problem);
  return read.context;
}

export function workerId(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (!BOUNDS.workerId.test(value)) throw invalidArgument(field, `must be ${BOUND_TEXTS.workerId}`);
  return value;
}

/**
 * A UUID in any letter case (RFC 9562: UUIDs are case-insensitive on input),
 * normalised to the lower case we store, so an upper-case id of an existing
 * job finds it and one that names no job is not_found, never invalid_argument.
 */
export function jobId(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  const id = value.toLowerCase();
  if (!isJobId(id)) throw invalidArgument(field, "must be a job id (a UUID)");
  return id;
}

export function leaseToken(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > BOUNDS.leaseTokenChars) throw invalidArgument(field, "is not a lease token");
  return value;
}

export function text(field: string, value: string): string {
  // value.length counts UTF-16 units; only a long string needs counting by character.
  if (value.length > BOUNDS.textChars && codePointCount(value) > BOUNDS.textChars) {
    throw invalidArgument(field, `must be at most ${BOUNDS.textChars} characters`);
  }
  return value;
}

/** Characters as docs/api.md "Bounds" counts them: Unicode code points (an emoji is one, not two UTF-16 units). */
function codePointCount(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/** Whether `ms` plus `nanos` (its sub-millisecond rest dropped by the conversion) is past `limitMs`. */
function pastMs(ms: number, nanos: number, limitMs: number): boolean {
  return ms > limitMs || (ms === limitMs && nanos % 1e6 !== 0);
}

export function intInRange(field: string, value: number, [min, max]: readonly [number, number], fallback?: number): number {
  if (value === 0 && fallback !== undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(field, `must be between ${min} and ${max}`);
  }
  return value;
}

export function durationMs(field: string, value: Duration): number {
  const seconds = Number(value.seconds);
  if (value.seconds < 0n || value.nanos < 0 || !Number.isSafeInteger(seconds)) {
    throw invalidArgument(field, "must not be negative");
  }
  return seconds * 1000 + Math.floor(value.nanos / 1e6);
}

/** An optional Duration: absent takes the default; present must be within bounds. */
export function durationInRange(
  field: string,
  value: Duration | undefined,
  [min, max]: readonly [number, number],
  fallback?: number,
): number | undefined {
  if (value === undefined) return fallback;
  const ms = durationMs(field, value);
  if (ms < min || pastMs(ms, value.nanos, max))
    throw invalidArgument(field, `must be between ${formatDurationText(min, "bound")} and ${formatDurationText(max, "bound")}`);
  return ms;
}

/** A present Duration that must be whole minutes (GetQueueActivity's window and step: the samples are per minute). */
function wholeMinutes(field: string, value: Duration | undefined, ms: number): void {
  if (value !== undefined && (ms % 60_000 !== 0 || value.nanos !== 0)) throw invalidArgument(field, "must be a whole number of minutes");
}

/**
 * GetQueueActivity's span (docs/api.md "Queue activity"): the window and
 * the step of its points, whole minutes within their bounds, the window a
 * multiple of the step.
 */
export function activitySpan(req: { window?: Duration; step?: Duration }): { windowMs: number; stepMs: number } {
  const windowMs = durationInRange("window", req.window, BOUNDS.activityWindowMs, DEFAULTS.activityWindowMs)!;
  wholeMinutes("window", req.window, windowMs);
  const stepMs = durationInRange("step", req.step, BOUNDS.activityStepMs, DEFAULTS.activityStepMs)!;
  wholeMinutes("step", req.step, stepMs);
  if (windowMs % stepMs !== 0) {
    throw invalidArgument("window", `must be a multiple of step (${formatDurationText(stepMs, "bound")})`);
  }
  return { windowMs, stepMs };
}

/** How deeply a google.protobuf.Value nests (domain/json-depth.ts's nestingDepth). */
export function valueDepth(value: Value, limit: number): number {
  return nestingDepth(value, valueChildren, limit);
}

function valueChildren(value: Value): Value[] | undefined {
  const kind = value.kind;
  if (kind.case === "listValue") return kind.value.values;
  if (kind.case === "structValue") return Object.values(kind.value.fields);
  return undefined;
}

/**
 * Refuses a Value nested deeper than docs/api.md "Bounds" allows (32 levels):
 * clients' protobuf decoders give up not far past it, so a job nested deeper
 * could be stored but never read back or leased by a gRPC or Connect binary
 * client.
 */
export function assertJsonDepth(field: string, value: Value): void {
  if (valueDepth(value, BOUNDS.jsonDepth) > BOUNDS.jsonDepth) {
    throw invalidArgument(field, `is ${nestedTooDeepText()}`);
  }
}

/** A google.protobuf.Value as compact JSON text, within the 32-level bound and `maxBytes` (default 64 KiB). */
export function jsonText(field: string, value: Value | undefined, maxBytes: number = BOUNDS.jsonBytes): string {
  if (value === undefined) return "null";
  assertJsonDepth(field, value);
  let json: JsonValue;
  try {
    json = toJson(ValueSchema, value);
  } catch (err) {
    throw invalidArgument(field, `is not a JSON value (${(err as Error).message})`);
  }
  return withinBytes(field, JSON.stringify(json), maxBytes);
}

/** JSON text within `maxBytes` (over it: PAYLOAD_TOO_LARGE naming the field). */
function withinBytes(field: string, text: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > maxBytes) throw payloadTooLarge(field, bytes, maxBytes);
  return text;
}

/** A submitted payload as JSON text: read as such by a hand decoder (hand-wire.ts), or from its Value. */
function submittedPayloadJson(field: string, req: SubmitRequest): string {
  const decoded = decodedJsonOf(req);
  return decoded === undefined ? jsonText(field, req.payload) : withinBytes(field, decoded, BOUNDS.jsonBytes);
}

/**
 * An optional Value (a result): absent is null, not the JSON text "null".
 * `decoded` is its JSON text when a hand decoder read it (hand-wire.ts).
 */
export function optionalJsonText(field: string, value: Value | undefined, decoded?: string): string | null {
  if (decoded !== undefined) return withinBytes(field, decoded, BOUNDS.jsonBytes);
  return value === undefined ? null : jsonText(field, value);
}

/**
 * A heartbeat's progress (docs/api.md "Snooze and progress"): absent keeps
 * the progress reported before; present is any JSON value of at most 4 KiB as
 * compact JSON (over it: PAYLOAD_TOO_LARGE naming the field) and 32 levels;
 * `decoded` as for optionalJsonText.
 */
export function progressJsonText(field: string, value: Value | undefined, decoded?: string): string | undefined {
  if (decoded !== undefined) return withinBytes(field, decoded, BOUNDS.progressJsonBytes);
  return value === undefined ? undefined : jsonText(field, value, BOUNDS.progressJsonBytes);
}

/** Snooze's delay (docs/api.md "Snooze and progress"): absent is 0s (eligible at once); present within 0s..30d, as a submit's delay. */
export function snoozeDelayMs(field: string, value: Duration | undefined): number {
  return durationInRange(field, value, BOUNDS.snoozeDelayMs, DEFAULTS.snoozeDelayMs)!;
}

/** What Fail and an AckFail report. */
export interface Failure {
  error: string;
  permanent: boolean;
  retryDelayMs: number | undefined;
}

/** The failure fields of FailRequest or AckFail; `path` prefixes their names. */
export function failure(path: string, req: { error: string; permanent: boolean; retryDelay?: Duration }): Failure {
  return {
    error: text(`${path}error`, req.error),
    permanent: req.permanent,
    retryDelayMs: durationInRange(`${path}retry_delay`, req.retryDelay, BOUNDS.retryDelayMs),
  };
}

function timestampMs(field: string, value: Timestamp): number {
  if (value.nanos < 0 || value.nanos > 999_999_999) throw invalidArgument(field, "is not a valid timestamp");
  return Number(value.seconds) * 1000 + Math.floor(value.nanos / 1e6);
}

/**
 * SubmitRequest -> NewJob. `headerKey` is the Idempotency-Key header; it
 * equals the same key sent as the field, and the two must not differ.
 */
export function newJob(req: SubmitRequest, now: number, path = "", headerKey?: string): NewJob {
  const f = (name: string) => `${path}${name}`;
  let schedule: NewJob["schedule"] = null;
  if (req.schedule.case === "scheduleTime") {
    const at = timestampMs(f("schedule_time"), req.schedule.value);
    if (pastMs(at, req.schedule.value.nanos, now + BOUNDS.scheduleAheadMs))
      throw invalidArgument(f("schedule_time"), `must be ${BOUND_TEXTS.scheduleAhead}`);
    schedule = { at };
  } else if (req.schedule.case === "delay") {
    const delayMs = durationInRange(f("delay"), req.schedule.value, [0, BOUNDS.scheduleAheadMs])!;
    schedule = { delayMs };
  }
  const dependencies = jobDependencies(req, path);
  let key: string | null = req.idempotencyKey === "" ? null : req.idempotencyKey;
  if (headerKey !== undefined) {
    if (key !== null && key !== headerKey) {
      throw invalidArgument(f("idempotency_key"), "differs from the Idempotency-Key header; send one or make them equal");
    }
    key = headerKey;
  }
  if (key !== null && !BOUNDS.idempotencyKey.test(key)) {
    throw invalidArgument(f("idempotency_key"), `must be ${BOUND_TEXTS.visible}`);
  }
  return {
    queue: queueName(f("queue"), req.queue, DEFAULTS.queue),
    task: queueName(f("task"), req.task),
    groupKey: groupKey(f("group_key"), req.groupKey),
    payloadJson: submittedPayloadJson(f("payload"), req),
    priority: intInRange(f("priority"), req.priority, BOUNDS.priority),
    maxAttempts: intInRange(f("max_attempts"), req.maxAttempts, BOUNDS.maxAttempts, DEFAULTS.maxAttempts),
    retryBaseDelayMs: durationInRange(f("retry_base_delay"), req.retryBaseDelay, BOUNDS.retryBaseDelayMs, DEFAULTS.retryBaseDelayMs)!,
    schedule,
    idempotencyKey: key,
    traceContext: traceContext(f("trace_context"), req.traceContext),
    ...(dependencies === undefined ? {} : { dependencies }),
  };
}

const POLICY_FROM_WIRE = new Map<DependencyFailurePolicy, DependencyPolicy>([
  [DependencyFailurePolicy.UNSPECIFIED, "wait"],
  [DependencyFailurePolicy.WAIT, "wait"],
  [DependencyFailurePolicy.CANCEL, "cancel"],
  [DependencyFailurePolicy.IGNORE, "ignore"],
]);

/**
 * A submission's dependencies (docs/api.md "Workflows"): `depends_on` ids
 * and `depends_on_refs` names, each named once, at most BOUNDS.dependencies
 * together; the refs are resolved to batch indexes by resolveRefs. Undefined
 * when it has none.
 */
function jobDependencies(req: SubmitRequest, path: string): NewJobDependencies | undefined {
  const f = (name: string) => `${path}${name}`;
  const policy = POLICY_FROM_WIRE.get(req.onDependencyFailure);
  if (policy === undefined)
    throw invalidArgument(f("on_dependency_failure"), `${req.onDependencyFailure} is not a DependencyFailurePolicy`);
  if (req.ref !== "" && !BOUNDS.ref.test(req.ref)) throw invalidArgument(f("ref"), `must be ${BOUND_TEXTS.visible}`);
  if (req.dependsOn.length === 0 && req.dependsOnRefs.length === 0) return undefined;
  if (req.dependsOn.length + req.dependsOnRefs.length > BOUNDS.dependencies) {
    const field = req.dependsOn.length > BOUNDS.dependencies ? "depends_on" : "depends_on_refs";
    throw invalidArgument(
      f(field),
      `names ${req.dependsOn.length + req.dependsOnRefs.length} jobs with depends_on and depends_on_refs together; the limit is ${BOUNDS.dependencies}`,
    );
  }
  const ids = req.dependsOn.map((id, i) => jobId(f(`depends_on[${i}]`), id));
  // A Set, not indexOf: a batch of 500 jobs naming 1,000 each must not cost a quadratic scan per job.
  const seenIds = new Set<string>();
  ids.forEach((id, i) => {
    if (seenIds.has(id)) throw invalidArgument(f(`depends_on[${i}]`), `names job ${id} a second time`);
    seenIds.add(id);
  });
  const seenRefs = new Set<string>();
  req.dependsOnRefs.forEach((ref, i) => {
    if (!BOUNDS.ref.test(ref)) throw invalidArgument(f(`depends_on_refs[${i}]`), `must be ${BOUND_TEXTS.visible}`);
    if (seenRefs.has(ref)) throw invalidArgument(f(`depends_on_refs[${i}]`), `names ref "${ref}" a second time`);
    seenRefs.add(ref);
  });
  return { ids, refs: [...req.dependsOnRefs], refIndexes: [], policy, path };
}

/**
 * SubmitBatch (docs/api.md "Workflows"): each job's `depends_on_refs`
 * resolved to the indexes of the jobs of the batch whose `ref` they name,
 * before or after it. A ref used twice names `jobs[i].ref`; a ref that no
 * job has, or refs that form a cycle, name `jobs[i].depends_on_refs`.
 * Submit has no batch: its `depends_on_refs` must be empty.
 */
export function resolveRefs(reqs: readonly SubmitRequest[], specs: NewJob[], batch: boolean): void {
  const byRef = new Map<string, number>();
  reqs.forEach((req, i) => {
    if (req.ref === "") return;
    const other = byRef.get(req.ref);
    if (other !== undefined)
      throw invalidArgument(`jobs[${i}].ref`, `"${req.ref}" is the ref of jobs[${other}] too; refs are unique within a batch`);
    byRef.set(req.ref, i);
  });
  specs.forEach((spec, i) => {
    const deps = spec.dependencies;
    if (deps === undefined || deps.refs.length === 0) return;
    if (!batch) throw invalidArgument("depends_on_refs", "names jobs of the same SubmitBatch; use depends_on with job ids in a Submit");
    const refIndexes = deps.refs.map((ref) => {
      const k = byRef.get(ref);
      if (k === undefined) throw invalidArgument(`jobs[${i}].depends_on_refs`, `"${ref}" is the ref of no job of this batch`);
      return k;
    });
    spec.dependencies = { ...deps, refIndexes };
  });
  const cycle = refCycle(specs);
  if (cycle !== undefined) {
    const names = cycle.map((k) => `"${reqs[k].ref}"`).join(" -> ");
    throw invalidArgument(`jobs[${cycle[0]}].depends_on_refs`, `forms a cycle: ${names}`);
  }
}

/** The first cycle among the batch's refs, as job indexes from a job back to itself; undefined when there is none. */
function refCycle(specs: readonly NewJob[]): number[] | undefined {
  const state = new Uint8Array(specs.length); // 0 unseen, 1 on the current path, 2 done
  const path: number[] = [];
  const visit = (i: number): number[] | undefined => {
    state[i] = 1;
    path.push(i);
    for (const k of specs[i].dependencies?.refIndexes ?? []) {
      if (state[k] === 1) return [...path.slice(path.indexOf(k)), k];
      if (state[k] === 0) {
        const found = visit(k);
        if (found !== undefined) return found;
      }
    }
    path.pop();
    state[i] = 2;
    return undefined;
  };
  for (let i = 0; i < specs.length; i++) {
    if (state[i] === 0) {
      const found = visit(i);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** A Claim request as a long-poll claim (ClaimRequest `wait`), validated in field order. */
export function claimSpec(req: { queue: string; workerId: string; leaseDuration?: Duration; maxJobs: number; wait?: Duration }): {
  queue: string;
  workerId: string;
  leaseDurationMs: number;
  maxJobs: number;
  waitMs: number;
} {
  return {
    queue: queueName("queue", req.queue, DEFAULTS.queue),
    workerId: workerId("worker_id", req.workerId),
    leaseDurationMs: durationInRange("lease_duration", req.leaseDuration, BOUNDS.leaseDurationMs, DEFAULTS.leaseDurationMs)!,
    maxJobs: intInRange("max_jobs", req.maxJobs, BOUNDS.maxJobs, DEFAULTS.maxJobs),
    waitMs: durationInRange("wait", req.wait, BOUNDS.waitMs, DEFAULTS.waitMs)!,
  };
}

/** StreamClaimsRequest or WorkStart: the stream's queue, worker, lease duration and room. */
export function claimStreamSpec(
  path: string,
  req: { queue: string; workerId: string; leaseDuration?: Duration; maxInFlight: number },
): { queue: string; workerId: string; leaseDurationMs: number; maxInFlight: number } {
  return {
    queue: queueName(`${path}queue`, req.queue, DEFAULTS.queue),
    workerId: workerId(`${path}worker_id`, req.workerId),
    leaseDurationMs: durationInRange(`${path}lease_duration`, req.leaseDuration, BOUNDS.leaseDurationMs, DEFAULTS.leaseDurationMs)!,
    maxInFlight: intInRange(`${path}max_in_flight`, req.maxInFlight, BOUNDS.maxInFlight, DEFAULTS.maxInFlight),
  };
}

/** A request's `view`: true for JOB_VIEW_BASIC, false for the full job (unspecified or FULL). */
export function basicView(field: string, value: JobView): boolean {
  if (value === JobView.BASIC) return true;
  if (value === JobView.UNSPECIFIED || value === JobView.FULL) return false;
  throw invalidArgument(field, "must be JOB_VIEW_UNSPECIFIED, JOB_VIEW_FULL or JOB_VIEW_BASIC");
}

export function jobStates(field: string, values: JobState[]): DomainState[] {
  const states = new Set<DomainState>();
  values.forEach((v, i) => {
    const s = STATE_FROM_WIRE.get(v);
    if (s === undefined) throw invalidArgument(`${field}[${i}]`, "must be a JobState other than JOB_STATE_UNSPECIFIED");
    states.add(s);
  });
  return [...states];
}

/**
 * CreateSchedule's schedule -> ScheduleSpec (docs/api.md "Schedules"), fields
 * named under `path` (`schedule.`). The template is validated exactly as a
 * SubmitRequest (`schedule.template.queue`, ...), except that it may carry no
 * idempotency_key (each run brings its own) and no schedule_time (a fixed
 * instant cannot recur; a delay counts from each run time). next_run_time and
 * last_run_time are the server's and are ignored.
 */
export function scheduleSpec(path: string, schedule: Schedule | undefined, now: number): ScheduleSpec {
  const f = (name: string) => `${path}${name}`;
  if (schedule === undefined) throw invalidArgument(path.replace(/\.$/, ""), "is required");
  const name = queueName(f("name"), schedule.name);
  let timezone = "UTC";
  if (schedule.timezone !== "") {
    const canonical = canonicalTimeZone(schedule.timezone);
    if (canonical === undefined) {
      throw invalidArgument(f("timezone"), "must be an IANA time zone name, such as UTC, Europe/Berlin or America/New_York");
    }
    timezone = canonical;
  }
  let recurrence: Recurrence;
  const r = schedule.recurrence;
  if (r.case === "cron") {
    const expression = r.value.trim();
    if (expression === "") throw invalidArgument(f("cron"), "is required (or interval)");
    if (expression.length > BOUNDS.cronChars) throw invalidArgument(f("cron"), `must be at most ${BOUNDS.cronChars} characters`);
    const problem = cronProblem(expression, timezone, now);
    if (problem !== undefined) {
      throw invalidArgument(f("cron"), `is not a 5-field cron expression or @hourly-style shorthand (${problem})`);
    }
    recurrence = { cron: expression };
  } else if (r.case === "interval") {
    recurrence = { intervalMs: durationInRange(f("interval"), r.value, BOUNDS.scheduleIntervalMs)! };
  } else {
    throw invalidArgument(f("cron"), "one of cron and interval is required");
  }
  const template = schedule.template;
  if (template === undefined) throw invalidArgument(f("template"), "is required");
  if (template.idempotencyKey !== "") {
    throw invalidArgument(f("template.idempotency_key"), "must be empty: each run uses the key schedule:<name>:<run time>");
  }
  if (template.schedule.case === "scheduleTime") {
    throw invalidArgument(f("template.schedule_time"), "cannot recur; use delay, which counts from each run time");
  }
  if (Object.keys(template.traceContext).length > 0) {
    throw invalidArgument(f("template.trace_context"), "must be empty: each run starts a new trace");
  }
  if (template.dependsOn.length > 0 || template.dependsOnRefs.length > 0) {
    const field = template.dependsOn.length > 0 ? "template.depends_on" : "template.depends_on_refs";
    throw invalidArgument(f(field), "must be empty: a schedule's runs do not wait for other jobs");
  }
  const job = newJob(template, now, f("template."));
  return {
    name,
    recurrence,
    timezone,
    template: {
      queue: job.queue,
      task: job.task,
      groupKey: job.groupKey,
      payloadJson: job.payloadJson,
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      retryBaseDelayMs: job.retryBaseDelayMs,
      delayMs: job.schedule !== null && "delayMs" in job.schedule ? job.schedule.delayMs : null,
    },
    paused: schedule.paused,
  };
}

/** UpdateQueue's update_mask paths (AIP-161, relative to QueueConfig), by the domain field each names. */
const CONFIG_PATHS: ReadonlyMap<string, QueueConfigField> = new Map([
  ["max_running", "maxRunning"],
  ["rate_limit", "rateLimit"],
  ["rate_period", "ratePeriodMs"],
  ["group_max_running", "groupMaxRunning"],
  ["group_rate_limit", "groupRateLimit"],
  ["fair", "fair"],
  ["ordered", "ordered"],
]);

/** The paths CONFIG_PATHS knows, as the refusal of an unknown one lists them. */
const CONFIG_PATH_LIST = `${[...CONFIG_PATHS.keys()].join(", ")} or "*" (empty means all)`;

/**
 * UpdateQueue's `config` and `update_mask` (docs/api.md "Queue limits" and
 * "Groups"): the fields the mask names, each within its bound. An empty
 * mask (or "*") names every field, so `{queue}` alone removes every limit
 * and group rule. Fields the mask leaves out are ignored, whatever they hold
 * (AIP-134).
 */
export function queueConfigUpdate(req: { config?: QueueConfig; updateMask?: FieldMask }): QueueConfigUpdate {
  const paths = req.updateMask?.paths ?? [];
  const named = new Set<QueueConfigField>(paths.length === 0 ? QUEUE_CONFIG_FIELDS : []);
  for (const path of paths) {
    const field = path === "*" ? QUEUE_CONFIG_FIELDS : CONFIG_PATHS.get(path);
    if (field === undefined) {
      throw invalidArgument(
        "update_mask",
        `has the path ${JSON.stringify(path)}, which is not a field of QueueConfig; use ${CONFIG_PATH_LIST}`,
      );
    }
    for (const f of typeof field === "string" ? [field] : field) named.add(f);
  }
  const wire = req.config;
  const config = { ...NO_QUEUE_LIMITS };
  if (named.has("maxRunning")) config.maxRunning = intInRange("config.max_running", wire?.maxRunning ?? 0, BOUNDS.maxRunning);
  if (named.has("rateLimit")) config.rateLimit = intInRange("config.rate_limit", wire?.rateLimit ?? 0, BOUNDS.rateLimit);
  if (named.has("ratePeriodMs")) {
    config.ratePeriodMs = durationInRange("config.rate_period", wire?.ratePeriod, BOUNDS.ratePeriodMs, DEFAULTS.ratePeriodMs)!;
  }
  if (named.has("groupMaxRunning")) {
    config.groupMaxRunning = intInRange("config.group_max_running", wire?.groupMaxRunning ?? 0, BOUNDS.groupMaxRunning);
  }
  if (named.has("groupRateLimit")) {
    config.groupRateLimit = intInRange("config.group_rate_limit", wire?.groupRateLimit ?? 0, BOUNDS.groupRateLimit);
  }
  if (named.has("fair")) config.fair = wire?.fair ?? false;
  if (named.has("ordered")) config.ordered = wire?.ordered ?? false;
  return { config, fields: QUEUE_CONFIG_FIELDS.filter((f) => named.has(f)) };
}
