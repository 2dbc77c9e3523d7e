/**
 * The reference's bounds table, computed from the server's own limits
 * (src/domain/request-bounds.ts, compiled into dist/ by the tsc step of the
 * build), so that it says what validation enforces, with durations written
 * by src/domain/duration-text.ts. Fields are named as JSON names. The same
 * rows as Markdown are what docs/api.md "Bounds" shows
 * (test/docs/doc-tables.test.ts).
 */
const range = ([min, max], format = String) => `${format(min)}..${format(max)}`;

/**
 * @param {{ BOUNDS: any, DEFAULTS: any }} requestBounds the exports of dist/src/domain/request-bounds.js
 * @param {{ formatDurationText: (ms: number, style: "reference") => string }} durationText the exports of dist/src/domain/duration-text.js
 */
export function describeBounds({ BOUNDS: B, DEFAULTS: D }, { formatDurationText }) {
  /** 43200000 -> "12h", 2592000000 -> "30d", 60000 -> "60s" (the JSON form of a Duration counts seconds). */
  const duration = (ms) => formatDurationText(ms, "reference");
  return [
    { fields: ["queue", "task"], bound: `matches \`${B.name.source}\``, default: `queue \`"${D.queue}"\`; task required` },
    { fields: ["workerId"], bound: `matches \`${B.workerId.source}\``, default: "required" },
    { fields: ["idempotencyKey"], bound: `matches \`${B.idempotencyKey.source}\` (visible ASCII)`, default: "none" },
    {
      fields: ["groupKey"],
      bound: `empty, or matches \`${B.groupKey.source}\` (visible ASCII, no spaces)`,
      default: "none (ListJobs: any group)",
    },
    {
      fields: ["traceContext"],
      bound: `keys \`traceparent\` and \`tracestate\` only, each in W3C Trace Context syntax and at most ${B.traceContextBytes} bytes`,
      default: "the call's `traceparent` and `tracestate` headers",
    },
    {
      fields: ["payload", "result"],
      bound: `any JSON, at most ${B.jsonBytes / 1024} KiB as compact JSON and ${B.jsonDepth} levels of nesting (\`1\` is level 0, \`[1]\` level 1)`,
      default: "`null`",
    },
    {
      fields: ["progress"],
      bound: `any JSON, at most ${B.progressJsonBytes / 1024} KiB as compact JSON and ${B.jsonDepth} levels of nesting`,
      default: "absent: the progress reported before stays",
    },
    { fields: ["priority"], bound: `${range(B.priority)}, higher first`, default: "0" },
    { fields: ["maxAttempts"], bound: range(B.maxAttempts), default: String(D.maxAttempts) },
    { fields: ["retryBaseDelay"], bound: range(B.retryBaseDelayMs, duration), default: duration(D.retryBaseDelayMs) },
    {
      fields: ["delay", "scheduleTime"],
      bound: `at most ${duration(B.scheduleAheadMs)} ahead (Snooze: ${range(B.snoozeDelayMs, duration)}); Submit takes one or the other`,
      default: `now (Snooze: ${duration(D.snoozeDelayMs)}, eligible at once)`,
    },
    { fields: ["leaseDuration"], bound: range(B.leaseDurationMs, duration), default: duration(D.leaseDurationMs) },
    { fields: ["maxJobs"], bound: range(B.maxJobs), default: String(D.maxJobs) },
    { fields: ["wait"], bound: range(B.waitMs, duration), default: `${duration(D.waitMs)} (no wait)` },
    {
      fields: ["maxInFlight"],
      bound: `${range(B.maxInFlight)} unfinished leases per StreamClaims or Work stream`,
      default: String(D.maxInFlight),
    },
    { fields: ["retryDelay"], bound: range(B.retryDelayMs, duration), default: "the exponential backoff" },
    { fields: ["error", "reason"], bound: `at most ${B.textChars} characters`, default: "empty" },
    {
      fields: ["pageSize"],
      bound: `${range(B.pageSize)} (ListGroups: ${range(B.groupPageSize)})`,
      default: `${D.pageSize} (ListGroups: ${D.groupPageSize})`,
    },
    { fields: ["name"], bound: `a schedule's name: matches \`${B.name.source}\``, default: "required" },
    {
      fields: ["cron"],
      bound: `5 fields (minute hour day-of-month month day-of-week) or @yearly, @monthly, @weekly, @daily, @hourly; at most ${B.cronChars} characters`,
      default: "one of cron and interval",
    },
    { fields: ["interval"], bound: range(B.scheduleIntervalMs, duration), default: "one of cron and interval" },
    { fields: ["timezone"], bound: "an IANA time zone name", default: '`"UTC"`' },
    { fields: ["jobs"], bound: `1..${B.batchJobs} per SubmitBatch`, default: "required" },
    { fields: ["maxRunning"], bound: `${range(B.maxRunning)} jobs running at once`, default: "0 (no limit)" },
    { fields: ["rateLimit"], bound: `${range(B.rateLimit)} leases per \`ratePeriod\``, default: "0 (no limit)" },
    { fields: ["ratePeriod"], bound: range(B.ratePeriodMs, duration), default: duration(D.ratePeriodMs) },
    { fields: ["groupMaxRunning"], bound: `${range(B.groupMaxRunning)} jobs of one group running at once`, default: "0 (no limit)" },
    { fields: ["groupRateLimit"], bound: `${range(B.groupRateLimit)} leases of one group per \`ratePeriod\``, default: "0 (no limit)" },
    { fields: ["acks"], bound: `1..${B.acks} per Acknowledge, 0..${B.acks} per Work message or Claim`, default: "required (Acknowledge)" },
    {
      fields: ["window"],
      bound: `${range(B.activityWindowMs, duration)} in whole minutes, a multiple of \`step\` (GetQueueActivity)`,
      default: duration(D.activityWindowMs),
    },
    {
      fields: ["step"],
      bound: `${range(B.activityStepMs, duration)} in whole minutes (GetQueueActivity)`,
      default: duration(D.activityStepMs),
    },
    // A setting, not a field: one request, or one message of a stream.
    { fields: [], subject: "request body", bound: "`LEASEQUEUE_MAX_REQUEST_BYTES`", default: `${D.maxRequestBytes} bytes` },
  ];
}

/** A table cell's text: a `|` would end the cell, so it is escaped. */
const cell = (text) => text.replaceAll("|", "\\|");

/** The rows of describeBounds as the lines of a Markdown table, header included. */
export function boundsTableMarkdown(bounds) {
  return [
    "| field | bound | default |",
    "|---|---|---|",
    ...bounds.map((b) => `| ${cell(b.fields.length === 0 ? b.subject : b.fields.join(", "))} | ${cell(b.bound)} | ${cell(b.default)} |`),
  ];
}
