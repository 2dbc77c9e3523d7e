/**
 * The "Bounds" and "Defaults and identity" tables of docs/api.md, in one
 * place: the server validates requests against them (service/validate.ts),
 * the state machine falls back on the default lease
 * (domain/state-machine.ts), and the worker SDK refuses options and results
 * the server would refuse (worker/worker-options.ts, worker/result-checks.ts)
 * instead of finding out on the wire.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Characters of a queue or task name. */
const NAME_CHARS = 64;
/** Characters of a worker id, an idempotency key, a group key and a ref. */
const KEY_CHARS = 128;

/**
 * docs/api.md "Bounds". Ranges are `[min, max]`, inclusive; durations in milliseconds.
 *
 * Why this module lives in domain/ and why the SDK may import it: the SDK's rule is
 * "depends on gen/ only", so that `leasequeue/worker` never drags server
 * code (SQLite, the listeners) into a worker process. This module imports
 * nothing at all, so importing it drags nothing either, and the package
 * ships it: tsconfig.build.json compiles all of src/ into dist/ and
 * package.json "files" publishes dist/. A copy under src/worker/ would
 * have made domain/ import from the SDK's folder instead, against "domain
 * imports nothing of ours". test/architecture.test.ts holds both rules:
 * src/worker imports only gen/, itself and domain modules like this one
 * that import nothing but each other, and this file imports nothing.
 */
export const BOUNDS = {
  name: new RegExp(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,${NAME_CHARS - 1}}$`),
  workerId: new RegExp(`^[A-Za-z0-9._:@/-]{1,${KEY_CHARS}}$`),
  idempotencyKey: new RegExp(`^[\\x21-\\x7e]{1,${KEY_CHARS}}$`),
  /** A job's group (docs/api.md "Groups"), when it has one: visible ASCII, no spaces; empty means none. */
  groupKey: new RegExp(`^[\\x21-\\x7e]{1,${KEY_CHARS}}$`),
  /** Bytes (UTF-8) of each value of a trace_context, traceparent and tracestate (docs/api.md "Trace context"). */
  traceContextBytes: 512,
  /** Bytes of a payload or result as compact JSON text. */
  jsonBytes: 64 * 1024,
  /**
   * Nesting levels of a payload or result (`1` is level 0, `[1]` level 1).
   * Each level is two nested protobuf messages (Value, then Struct or
   * ListValue), three for an object where the decoder counts map entries
   * (C++ protobuf, as in Python grpcio), and decoders stop at 100 nested
   * messages. Inside a StreamClaimsResponse (response, Lease, Job) a
   * 32-level object is 99 deep for Python and 33 levels fail there; arrays
   * and protobuf-es (about 48 levels) have more room. So 32 is the most
   * every client can read, with no message wrapped any deeper than a Lease.
   */
  jsonDepth: 32,
  priority: [-100, 100],
  maxAttempts: [1, 100],
  retryBaseDelayMs: [0, HOUR],
  scheduleAheadMs: 30 * DAY,
  leaseDurationMs: [SECOND, 12 * HOUR],
  maxJobs: [1, 100],
  waitMs: [0, 60 * SECOND],
  /** WaitJob's timeout (docs/api.md "Workflows"): at most 15 minutes. */
  waitJobTimeoutMs: [0, 15 * MINUTE],
  maxInFlight: [1, 1000],
  /** Characters (code points) of a task, an error, a message. */
  textChars: 4096,
  pageSize: [1, 500],
  /** ListGroups' page_size (docs/api.md "Groups"): a group is one small row, so pages may be longer than ListJobs'. */
  groupPageSize: [1, 1000],
  /** Characters of a lease token a request may carry; a longer one is no token of this server's. */
  leaseTokenChars: 256,
  batchJobs: 500,
  /** Distinct jobs a job depends on, depends_on and depends_on_refs together (docs/api.md "Workflows"). */
  dependencies: 1000,
  /** A job's `ref` and each of its `depends_on_refs` (docs/api.md "Workflows"): an idempotency key's characters. */
  ref: new RegExp(`^[\\x21-\\x7e]{1,${KEY_CHARS}}$`),
  /** Acknowledgements in one Acknowledge request, Work message or Claim (docs/api.md "The batched path: Acknowledge and Work", "Claim with acks"). */
  acks: 1000,
  /** retry_delay on Fail (docs/api.md "Bounds"): up to 30 days, as far ahead as a submit may schedule a job. */
  retryDelayMs: [0, 30 * DAY],
  /** Snooze's delay (docs/api.md "Snooze and progress"): bounded like a submit's `delay`. */
  snoozeDelayMs: [0, 30 * DAY],
  /** Bytes of a heartbeat's progress as compact JSON text (docs/api.md "Snooze and progress": at most 4 KiB). */
  progressJsonBytes: 4 * 1024,
  /** A schedule's interval (docs/api.md "Schedules": at least 1s); longer than a year is a cron expression's job. */
  scheduleIntervalMs: [SECOND, 366 * DAY],
  /** Characters of a schedule's cron expression. */
  cronChars: 256,
  /**
   * QueueConfig (docs/api.md "Queue limits"). 0 means no limit. A limit above these is
   * no limit in practice; the ceilings keep counts and windows small enough
   * for one claim to check them cheaply.
   */
  maxRunning: [0, 100_000],
  rateLimit: [0, 1_000_000],
  /** At least a second: shorter windows would be finer than lease timing itself; at most a day. */
  ratePeriodMs: [SECOND, DAY],
  /** The group rules of QueueConfig (docs/api.md "Groups"), per group; 0 means no limit, as for the queue's own. */
  groupMaxRunning: [0, 100_000],
  groupRateLimit: [0, 1_000_000],
  /**
   * GetQueueActivity (docs/api.md "Queue activity"): how far back, and the span of each point, in whole minutes.
   * A day is what the store keeps (domain/queue-activity.ts ACTIVITY_RETENTION_MS).
   */
  activityWindowMs: [MINUTE, DAY],
  activityStepMs: [MINUTE, HOUR],
} as const;

/** What the text bounds ask for, in the words of the refusals (service/validate.ts): built from the same numbers. */
export const BOUND_TEXTS = {
  name: `1-${NAME_CHARS} characters of [A-Za-z0-9._:-], starting with a letter or digit`,
  workerId: `1-${KEY_CHARS} characters of [A-Za-z0-9._:@/-]`,
  visible: `1-${KEY_CHARS} visible ASCII characters (0x21-0x7e)`,
  groupKey: `empty or 1-${KEY_CHARS} visible ASCII characters (0x21-0x7e, no spaces)`,
  scheduleAhead: `at most ${BOUNDS.scheduleAheadMs / DAY} days ahead`,
} as const;

/** docs/api.md "Defaults and identity": what an absent (or zero) field means. */
export const DEFAULTS = {
  queue: "default",
  maxAttempts: 3,
  retryBaseDelayMs: 15 * SECOND,
  leaseDurationMs: 60 * SECOND,
  maxJobs: 1,
  waitMs: 0,
  /** WaitJob without a timeout: 30 seconds. */
  waitJobTimeoutMs: 30 * SECOND,
  maxInFlight: 1,
  /** Snooze without a delay: eligible again at once. */
  snoozeDelayMs: 0,
  pageSize: 50,
  /** ListGroups' page_size 0. */
  groupPageSize: 100,
  /** QueueConfig.rate_period when absent: rate_limit is then jobs per second. */
  ratePeriodMs: SECOND,
  /** GetQueueActivity without a window: the last hour, in points of a minute. */
  activityWindowMs: HOUR,
  activityStepMs: MINUTE,
  /**
   * Largest request body (a unary request, or one message of a stream) the
   * server reads unless LEASEQUEUE_MAX_REQUEST_BYTES says otherwise. The
   * SDK keeps each batch of acknowledgements under it.
   */
  maxRequestBytes: 128 * 1024,
} as const;
