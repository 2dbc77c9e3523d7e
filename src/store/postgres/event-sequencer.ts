/**
 * Events numbered in the order they become visible
 * (docs/postgresql.md "Event order across servers"): writers insert their
 * events unnumbered, or number them in their own last statement when the
 * sequence row is free ("Numbering in the writer"); `sequence_events()`,
 * run after commits here, moves every committed unnumbered event to
 * `job_events` in insertion order under the single `event_sequence` row's
 * lock, so runs are serial and each one's numbers exceed the last's.
 * EventSequencer shares one run among the callers that arrive meanwhile.
 */
import type pg from "pg";
import { quoteIdentifier, quoteLiteral } from "./identifiers.js";
import { notificationChannel } from "./notifications.js";
import { prepared } from "./prepared.js";

/** Most events moved by one sequencer transaction; sequence() loops while runs are full. */
export const SEQUENCER_BATCH = 10_000;

/**
 * The statement both numbering paths share: moves up to `limit` committed
 * waiting events to job_events in id order, numbered from v_last + 1, and
 * counts them INTO `into`.
 */
function moveWaitingEvents(limit: string, into: string): string {
  return `WITH batch AS (
    SELECT u.id FROM unsequenced_events u ORDER BY u.id LIMIT ${limit}
  ), taken AS (
    DELETE FROM unsequenced_events u USING batch b WHERE u.id = b.id RETURNING u.*
  ), numbered AS (
    INSERT INTO job_events (sequence, job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
    SELECT v_last + row_number() OVER (ORDER BY t.id), t.job_id, t.queue, t.kind, t.from_state, t.to_state,
      t.event_time, t.worker_id, t.attempt, t.message, t.group_key
    FROM taken t
    RETURNING 1
  )
  SELECT count(*) INTO ${into} FROM numbered;`;
}

export function sequencerFunctionSql(schema: string): string {
  const channel = quoteLiteral(notificationChannel(schema));
  return `
-- Numbers committed events (see event-sequencer.ts). Call it in a
-- transaction of its own, after the commits whose events it should number.
CREATE OR REPLACE FUNCTION sequence_events(max_events integer DEFAULT ${SEQUENCER_BATCH}, OUT through bigint, OUT moved integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
DECLARE
  v_last bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_transaction_state',
      MESSAGE = 'sequence_events() must run under READ COMMITTED, in a transaction of its own';
  END IF;
  -- Serial runs: the next one waits here until this one has committed.
  SELECT s.last_sequence INTO v_last FROM event_sequence s WHERE s.id = 1 FOR UPDATE;
  -- A new statement, a new snapshot: it sees every event committed before
  -- the lock was granted, and none that the previous run moved.
  ${moveWaitingEvents("max_events", "moved")}
  through := v_last + moved;
  IF moved > 0 THEN
    UPDATE event_sequence SET last_sequence = through WHERE id = 1;
    PERFORM pg_notify(${channel}, json_build_object('kind', 'events', 'through', through)::text);
  END IF;
END
$fn$;

-- A server's transaction records its events, as its last statement before
-- COMMIT (see "Numbering in the writer" in event-sequencer.ts). When the
-- sequence row is free it numbers them at once, after every committed
-- event still waiting, holding the row's lock to its commit like a
-- sequencer run; when another transaction holds the lock (or a backlog
-- waits), they go to unsequenced_events for the sequencer, as before.
-- Returns the sequences given to the events, or NULLs when none were.
-- (Before groups it took no p_group_key: that version goes, so that no call is ambiguous.)
DROP FUNCTION IF EXISTS record_events(uuid[], text[], text[], text[], text[], bigint[], text[], integer[], text[]);
CREATE OR REPLACE FUNCTION record_events(
  p_job_id uuid[], p_queue text[], p_kind text[], p_from_state text[], p_to_state text[],
  p_event_time bigint[], p_worker_id text[], p_attempt integer[], p_message text[], p_group_key text[],
  OUT first_sequence bigint, OUT through bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
DECLARE
  v_last bigint;
  v_moved integer;
BEGIN
  SELECT s.last_sequence INTO v_last FROM event_sequence s WHERE s.id = 1 FOR UPDATE SKIP LOCKED;
  IF FOUND THEN
    -- Committed events first (a job's earlier events among them come before its later ones here).
    ${moveWaitingEvents(String(SEQUENCER_BATCH), "v_moved")}
    IF v_moved < ${SEQUENCER_BATCH} THEN
      INSERT INTO job_events (sequence, job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
      SELECT v_last + v_moved + e.ord, e.job_id, e.queue, e.kind, e.from_state, e.to_state, e.event_time, e.worker_id, e.attempt,
        e.message, e.group_key
      FROM unnest(p_job_id, p_queue, p_kind, p_from_state, p_to_state, p_event_time, p_worker_id, p_attempt, p_message, p_group_key)
        WITH ORDINALITY AS e(job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key, ord);
      first_sequence := v_last + v_moved + 1;
      through := v_last + v_moved + cardinality(p_job_id);
      UPDATE event_sequence SET last_sequence = through WHERE id = 1;
      PERFORM pg_notify(${channel}, json_build_object('kind', 'events', 'through', through)::text);
      RETURN;
    END IF;
    -- A backlog larger than one run: ours wait behind it, in order.
    UPDATE event_sequence SET last_sequence = v_last + v_moved WHERE id = 1;
    PERFORM pg_notify(${channel}, json_build_object('kind', 'events', 'through', v_last + v_moved)::text);
  END IF;
  INSERT INTO unsequenced_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
  SELECT e.job_id, e.queue, e.kind, e.from_state, e.to_state, e.event_time, e.worker_id, e.attempt, e.message, e.group_key
  FROM unnest(p_job_id, p_queue, p_kind, p_from_state, p_to_state, p_event_time, p_worker_id, p_attempt, p_message, p_group_key)
    WITH ORDINALITY AS e(job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key, ord)
  ORDER BY e.ord;
END
$fn$;

-- Whether a sequencer run would find work: cheap enough for every catch-up.
CREATE OR REPLACE FUNCTION unsequenced_events_waiting() RETURNS boolean
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $fn$ SELECT EXISTS (SELECT 1 FROM unsequenced_events) $fn$;
`;
}

/** Something that runs one statement: a pool (each call its own transaction) or a client outside a transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/**
 * Runs the sequencer for one process, sharing runs among callers: a call is
 * answered by a run that started after it (so it numbers the caller's
 * committed events), and every call made while a run is under way shares
 * the next one. Resolves with the last sequence issued by that run.
 */
export class EventSequencer {
  readonly #db: Queryable;
  readonly #sql: string;
  #running: Promise<number> | undefined;
  #next: Promise<number> | undefined;

  constructor(db: Queryable, schema: string) {
    this.#db = db;
    this.#sql = `SELECT through, moved FROM ${quoteIdentifier(schema)}.sequence_events($1)`;
  }

  /** Numbers every event committed before this call. */
  sequence(): Promise<number> {
    if (this.#running === undefined) return this.#start();
    this.#next ??= this.#running.then(
      () => this.#start(),
      () => this.#start(),
    );
    return this.#next;
  }

  #start(): Promise<number> {
    this.#next = undefined;
    const run = this.#runUntilDrained().finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }

  async #runUntilDrained(): Promise<number> {
    for (;;) {
      const { rows } = await this.#db.query<{ through: string; moved: number }>(prepared(this.#sql, [SEQUENCER_BATCH]));
      const row = rows[0];
      if (row.moved < SEQUENCER_BATCH) return Number(row.through);
    }
  }
}
