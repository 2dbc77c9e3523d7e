/**
 * Transactional enqueue (docs/postgresql.md "Transactional enqueue"):
 * `<schema>.submit(queue, task, payload, ...)` creates a job inside the
 * caller's own transaction, so the job exists if and only if that transaction
 * commits.
 */
import { formatDurationText } from "../../domain/duration-text.js";
import { ACTIVITY_MINUTE_MS } from "../../domain/queue-activity.js";
import { BOUNDS, DEFAULTS } from "../../domain/request-bounds.js";
import { TRACE_CONTEXT_PROBLEMS, TRACEPARENT, TRACESTATE_MEMBER, TRACESTATE_MEMBERS } from "../../domain/trace-context.js";
import { quoteEscapeLiteral, quoteLiteral } from "./identifiers.js";
import { notificationChannel } from "./notifications.js";

const DAY_MS = 86_400_000;

/** A bound in whole days when it is one ("30 days"), else as the RPC's messages write a bound. */
function aheadText(ms: number): string {
  return ms % DAY_MS === 0 ? `${ms / DAY_MS} days` : formatDurationText(ms, "bound");
}

/** `RAISE` of a bad field: SQLSTATE, the field as COLUMN, and the RPC's `field: description` message. */
function refuse(field: string, description: string, sqlstate = "invalid_parameter_value"): string {
  return `RAISE EXCEPTION USING ERRCODE = '${sqlstate}', COLUMN = '${field}', MESSAGE = ${quoteLiteral(`${field}: ${description}`)}`;
}

/** Milliseconds of an interval, as the RPC truncates a Duration (sub-millisecond rest dropped). */
const intervalMs = (expr: string) => `floor(extract(epoch FROM ${expr}) * 1000)::bigint`;

/**
 * `<schema>.submit()` does what a Submit RPC does, no less strictly:
 * - validation against domain/request-bounds.ts (every bound below is generated from
 *   BOUNDS and DEFAULTS, never typed again), refusing with a SQLSTATE, a
 *   message `field: description` as the RPC words it, and the field in the
 *   error's COLUMN (node-postgres `err.column`, psycopg `e.diag.column_name`):
 *   22023 invalid_parameter_value for a bad field, 54000
 *   program_limit_exceeded for a payload over the size limit, 23505
 *   unique_violation for an idempotency key already used by a different
 *   request (the RPC's already_exists);
 * - defaults applied as the RPC applies them (NULL, and 0 or '' where the
 *   RPC's zero value means the default);
 * - the idempotency decision of domain/submission.ts: the same key with the
 *   same request (compared by submitFingerprint, computed in SQL to the same
 *   value) returns the existing job's id, also for a job submitted over the
 *   API;
 * - the same rows as the server: the job (id a UUIDv7, like domain/ids.ts),
 *   its SUBMITTED event (unsequenced, numbered after commit by
 *   event-sequencer.ts), its count delta (job-counts.ts) and its queue's
 *   activity delta (queue-activity-sql.ts: one more queued), and a `submitted`
 *   notification (notifications.ts) so that running servers wake the queue's
 *   claimers and number the event as soon as the transaction commits.
 *
 * Times come from the database's clock (clock_timestamp()): there is no
 * server clock in the caller's transaction.
 */
export function submitFunctionSql(schema: string): string {
  const name = quoteEscapeLiteral(BOUNDS.name.source);
  const key = quoteEscapeLiteral(BOUNDS.idempotencyKey.source);
  // The group key's characters; its length is checked with them (0..128, '' being none).
  const group = quoteEscapeLiteral("^[\\x21-\\x7e]{1,128}$");
  const [minPriority, maxPriority] = BOUNDS.priority;
  const [minAttempts, maxAttempts] = BOUNDS.maxAttempts;
  const [minRetry, maxRetry] = BOUNDS.retryBaseDelayMs;
  const ahead = BOUNDS.scheduleAheadMs;
  const channel = quoteLiteral(notificationChannel(schema));
  const traceparent = quoteEscapeLiteral(TRACEPARENT.source);
  const member = quoteEscapeLiteral(TRACESTATE_MEMBER.source);
  const problem = TRACE_CONTEXT_PROBLEMS;
  return `
-- A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, 74 random bits.
CREATE OR REPLACE FUNCTION new_job_id(now_ms bigint) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $fn$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(now_ms) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$fn$;

-- domain/submission.ts submitFingerprint: SHA-256 (base64url, unpadded) of
-- JSON.stringify([queue, task, canonical payload, priority, max_attempts,
-- retry_base_delay_ms, schedule]) with schedule null, ["at", ms] or ["delay", ms],
-- and ["group", key] appended when the job has a group.
DROP FUNCTION IF EXISTS request_fingerprint(text, text, text, integer, integer, bigint, text, bigint);
CREATE OR REPLACE FUNCTION request_fingerprint(queue text, task text, canonical_payload text, priority integer,
  max_attempts integer, retry_base_delay_ms bigint, schedule_kind text, schedule_ms bigint, group_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT rtrim(translate(encode(sha256(convert_to(
    '[' || to_json(queue)::text || ',' || to_json(task)::text || ',' || to_json(canonical_payload)::text
    || ',' || priority || ',' || max_attempts || ',' || retry_base_delay_ms || ','
    || CASE WHEN schedule_kind IS NULL THEN 'null' ELSE '[' || to_json(schedule_kind)::text || ',' || schedule_ms || ']' END
    || CASE WHEN group_key = '' THEN '' ELSE ',["group",' || to_json(group_key)::text || ']' END
    || ']', 'UTF8')), 'base64'), '+/', '-_'), '=')
$fn$;

-- Before groups, submit() took no group_key, and before trace context no
-- trace_context: those versions go, so that no call is ambiguous.
DROP FUNCTION IF EXISTS submit(text, text, jsonb, integer, integer, interval, timestamptz, interval, text);
DROP FUNCTION IF EXISTS submit(text, text, jsonb, integer, integer, interval, timestamptz, interval, text, text);

CREATE OR REPLACE FUNCTION submit(
  queue text DEFAULT NULL,
  task text DEFAULT NULL,
  payload jsonb DEFAULT NULL,
  priority integer DEFAULT NULL,
  max_attempts integer DEFAULT NULL,
  retry_base_delay interval DEFAULT NULL,
  schedule_time timestamptz DEFAULT NULL,
  delay interval DEFAULT NULL,
  idempotency_key text DEFAULT NULL,
  group_key text DEFAULT NULL,
  trace_context jsonb DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
  now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  v_queue text;
  v_task text := submit.task;
  v_key text := nullif(submit.idempotency_key, '');
  v_group text := coalesce(submit.group_key, '');
  v_payload text;
  v_priority integer := coalesce(submit.priority, 0);
  v_max_attempts integer := coalesce(nullif(submit.max_attempts, 0), ${DEFAULTS.maxAttempts});
  v_retry_ms bigint := ${DEFAULTS.retryBaseDelayMs};
  v_schedule_kind text;
  v_schedule_ms bigint;
  v_hash text;
  v_id uuid;
  v_found_id uuid;
  v_found_hash text;
  v_traceparent text;
  v_tracestate text;
  v_entry record;
  v_members integer := 0;
  v_member text;
BEGIN
  -- In the RPC's order (service/validate.ts newJob): schedule, key, group, queue, task, payload, priority, max_attempts, retry_base_delay, trace_context.
  IF submit.schedule_time IS NOT NULL AND submit.delay IS NOT NULL THEN
    ${refuse("delay", "give schedule_time or delay, not both")};
  END IF;
  IF submit.schedule_time IS NOT NULL THEN
    IF NOT isfinite(submit.schedule_time) THEN
      ${refuse("schedule_time", "is not a valid timestamp")};
    END IF;
    IF submit.schedule_time > clock_timestamp() + interval '${ahead} milliseconds' THEN
      ${refuse("schedule_time", `must be at most ${aheadText(ahead)} ahead`)};
    END IF;
    v_schedule_kind := 'at';
    v_schedule_ms := floor(extract(epoch FROM submit.schedule_time) * 1000)::bigint;
  ELSIF submit.delay IS NOT NULL THEN
    IF submit.delay < interval '0' THEN
      ${refuse("delay", "must not be negative")};
    END IF;
    IF extract(epoch FROM submit.delay) * 1000 > ${ahead} THEN
      ${refuse("delay", `must be between 0s and ${formatDurationText(ahead, "bound")}`)};
    END IF;
    v_schedule_kind := 'delay';
    v_schedule_ms := ${intervalMs("submit.delay")};
  END IF;
  IF v_key IS NOT NULL AND v_key !~ ${key} THEN
    ${refuse("idempotency_key", "must be 1-128 visible ASCII characters (0x21-0x7e)")};
  END IF;
  IF v_group <> '' AND v_group !~ ${group} THEN
    ${refuse("group_key", "must be at most 128 visible ASCII characters (0x21-0x7e), no spaces")};
  END IF;
  v_queue := coalesce(nullif(submit.queue, ''), ${quoteLiteral(DEFAULTS.queue)});
  IF v_queue !~ ${name} THEN
    ${refuse("queue", "must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit")};
  END IF;
  IF v_task IS NULL OR v_task = '' THEN
    ${refuse("task", "is required")};
  END IF;
  IF v_task !~ ${name} THEN
    ${refuse("task", "must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit")};
  END IF;
  -- The exact size is that of the compact text; jsonb's own text is never
  -- shorter, so one far past the limit is refused before it is walked.
  IF octet_length(coalesce(submit.payload, 'null'::jsonb)::text) > ${16 * BOUNDS.jsonBytes} THEN
    RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded', COLUMN = 'payload',
      MESSAGE = 'payload: is ' || octet_length(submit.payload::text) || ' bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes';
  END IF;
  v_payload := json_text(coalesce(submit.payload, 'null'::jsonb), false, 'payload', ${BOUNDS.jsonDepth});
  IF octet_length(v_payload) > ${BOUNDS.jsonBytes} THEN
    RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded', COLUMN = 'payload',
      MESSAGE = 'payload: is ' || octet_length(v_payload) || ' bytes of JSON; the limit is ${BOUNDS.jsonBytes} bytes';
  END IF;
  IF v_priority < ${minPriority} OR v_priority > ${maxPriority} THEN
    ${refuse("priority", `must be between ${minPriority} and ${maxPriority}`)};
  END IF;
  IF v_max_attempts < ${minAttempts} OR v_max_attempts > ${maxAttempts} THEN
    ${refuse("max_attempts", `must be between ${minAttempts} and ${maxAttempts}`)};
  END IF;
  IF submit.retry_base_delay IS NOT NULL THEN
    IF submit.retry_base_delay < interval '0' THEN
      ${refuse("retry_base_delay", "must not be negative")};
    END IF;
    IF extract(epoch FROM submit.retry_base_delay) * 1000 < ${minRetry}
       OR extract(epoch FROM submit.retry_base_delay) * 1000 > ${maxRetry} THEN
      ${refuse("retry_base_delay", `must be between ${formatDurationText(minRetry, "bound")} and ${formatDurationText(maxRetry, "bound")}`)};
    END IF;
    v_retry_ms := ${intervalMs("submit.retry_base_delay")};
  END IF;
  -- domain/trace-context.ts traceContextOf: an object of traceparent and
  -- tracestate, W3C Trace Context syntax, each at most ${BOUNDS.traceContextBytes} bytes.
  IF submit.trace_context IS NOT NULL AND submit.trace_context <> 'null'::jsonb THEN
    IF jsonb_typeof(submit.trace_context) <> 'object' THEN
      ${refuse("trace_context", "must be an object of strings")};
    END IF;
    FOR v_entry IN SELECT e.key, e.value FROM jsonb_each(submit.trace_context) e LOOP
      IF v_entry.key NOT IN ('traceparent', 'tracestate') THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'trace_context',
          MESSAGE = 'trace_context: has the key ' || to_json(v_entry.key)::text || '; the keys are traceparent and tracestate';
      END IF;
      IF jsonb_typeof(v_entry.value) <> 'string' THEN
        ${refuse("trace_context", "must be an object of strings")};
      END IF;
      IF octet_length(v_entry.value #>> '{}') > ${BOUNDS.traceContextBytes} THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = 'trace_context',
          MESSAGE = 'trace_context: ' || v_entry.key || ' must be at most ${BOUNDS.traceContextBytes} bytes';
      END IF;
      IF v_entry.key = 'traceparent' THEN
        v_traceparent := v_entry.value #>> '{}';
      ELSE
        v_tracestate := v_entry.value #>> '{}';
      END IF;
    END LOOP;
    IF v_traceparent IS NULL AND v_tracestate IS NOT NULL THEN
      ${refuse("trace_context", problem.orphanTracestate)};
    END IF;
    IF v_traceparent IS NOT NULL THEN
      IF v_traceparent !~ ${traceparent} THEN
        ${refuse("trace_context", problem.traceparent)};
      END IF;
      IF left(v_traceparent, 2) = 'ff' THEN
        ${refuse("trace_context", problem.version)};
      END IF;
      IF left(v_traceparent, 2) = '00' AND length(v_traceparent) <> 55 THEN
        ${refuse("trace_context", problem.fields)};
      END IF;
      IF substr(v_traceparent, 4, 32) = repeat('0', 32) THEN
        ${refuse("trace_context", problem.traceId)};
      END IF;
      IF substr(v_traceparent, 37, 16) = repeat('0', 16) THEN
        ${refuse("trace_context", problem.parentId)};
      END IF;
    END IF;
    IF v_tracestate IS NOT NULL THEN
      FOR v_member IN SELECT btrim(m, E' \\t') FROM regexp_split_to_table(v_tracestate, ',') m LOOP
        CONTINUE WHEN v_member = '';
        IF v_member !~ ${member} THEN
          ${refuse("trace_context", problem.tracestate)};
        END IF;
        v_members := v_members + 1;
      END LOOP;
      IF v_members > ${TRACESTATE_MEMBERS} THEN
        ${refuse("trace_context", problem.members)};
      END IF;
      v_tracestate := nullif(v_tracestate, '');
    END IF;
  END IF;

  IF v_key IS NOT NULL THEN
    v_hash := request_fingerprint(v_queue, v_task,
      json_text(coalesce(submit.payload, 'null'::jsonb), true, 'payload', ${BOUNDS.jsonDepth}),
      v_priority, v_max_attempts, v_retry_ms, v_schedule_kind, v_schedule_ms, v_group);
  END IF;
  v_id := new_job_id(now_ms);
  INSERT INTO jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
      schedule_time, create_time, update_time, deliveries, idempotency_key, request_hash, group_key, traceparent, tracestate)
    VALUES (v_id, v_queue, v_task, v_payload, v_priority, 'queued', 0, v_max_attempts, v_retry_ms,
      CASE v_schedule_kind WHEN 'at' THEN v_schedule_ms WHEN 'delay' THEN now_ms + v_schedule_ms ELSE now_ms END,
      now_ms, now_ms, 0, v_key, v_hash, v_group, v_traceparent, v_tracestate)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
  IF NOT FOUND THEN
    -- The key names a job already (committed, or committed by a concurrent
    -- submit this INSERT waited for): the same request gets that job.
    SELECT j.id, j.request_hash INTO v_found_id, v_found_hash
      FROM jobs j WHERE j.queue = v_queue AND j.idempotency_key = v_key;
    IF v_found_hash IS DISTINCT FROM v_hash THEN
      RAISE EXCEPTION USING ERRCODE = 'unique_violation', COLUMN = 'idempotency_key', CONSTRAINT = 'jobs_idempotency_key',
        MESSAGE = 'idempotency_key: was already used in queue "' || v_queue || '" for a different request (job ' || v_found_id || ')';
    END IF;
    RETURN v_found_id;
  END IF;
  INSERT INTO unsequenced_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
    VALUES (v_id, v_queue, 'submitted', NULL, 'queued', now_ms, NULL, 0, NULL, v_group);
  INSERT INTO job_count_deltas (queue, state, delta) VALUES (v_queue, 'queued', 1);
  INSERT INTO queue_activity_deltas (queue, minute, queued) VALUES (v_queue, now_ms - now_ms % ${ACTIVITY_MINUTE_MS}, 1);
  PERFORM pg_notify(${channel}, json_build_object('kind', 'submitted', 'queue', v_queue)::text);
  RETURN v_id;
END
$fn$;
`;
}
