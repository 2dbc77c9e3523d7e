/**
 * The statements that write and read events (see event-sequencer.ts for how
 * they are numbered). Writers insert into `unsequenced_events` only;
 * readers read `job_events` only, where every row has its final sequence.
 */
import type { EventDraft } from "../../domain/job.js";
import { quoteIdentifier } from "./identifiers.js";

const EVENT_COLUMNS = "job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key";

export interface EventStatements {
  /** $1..$10 as insertUnsequenced: record_events(), numbering them when it can; answers first_sequence and through (NULL: not numbered). */
  recordEvents: string;
  /** $1..$10: one array per column (unsequencedEventParams); rows keep the arrays' order. */
  insertUnsequenced: string;
  /** $1 after, $2 limit. */
  eventsAfter: string;
  /** $1 queue, $2 after, $3 limit. */
  eventsOfQueueAfter: string;
  /** $1 job id, $2 after, $3 limit, $4 queue or NULL. */
  eventsOfJobAfter: string;
  /** $1 job id: one job's numbered events, oldest first. */
  eventsOfJob: string;
  /** oldest stored, latest issued, pruned through: one statement, one snapshot. */
  eventBounds: string;
}

export function eventStatements(schema: string): EventStatements {
  const s = quoteIdentifier(schema);
  const select = `SELECT sequence, ${EVENT_COLUMNS} FROM ${s}.job_events`;
  return {
    recordEvents: `SELECT first_sequence, through FROM ${s}.record_events($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
      $6::bigint[], $7::text[], $8::integer[], $9::text[], $10::text[])`,
    insertUnsequenced: `INSERT INTO ${s}.unsequenced_events (${EVENT_COLUMNS})
      SELECT ${EVENT_COLUMNS}
      FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::integer[], $9::text[],
        $10::text[])
        WITH ORDINALITY AS e(${EVENT_COLUMNS}, ord)
      ORDER BY ord`,
    eventsAfter: `${select} WHERE sequence > $1 ORDER BY sequence LIMIT $2`,
    eventsOfQueueAfter: `${select} WHERE queue = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`,
    eventsOfJobAfter: `${select} WHERE job_id = $1 AND sequence > $2 AND ($4::text IS NULL OR queue = $4) ORDER BY sequence LIMIT $3`,
    eventsOfJob: `${select} WHERE job_id = $1 ORDER BY sequence`,
    eventBounds: `SELECT (SELECT coalesce(min(sequence), 0) FROM ${s}.job_events) AS oldest,
      (SELECT last_sequence FROM ${s}.event_sequence WHERE id = 1) AS latest,
      (SELECT pruned_through FROM ${s}.event_retention WHERE id = 1) AS pruned_through`,
  };
}

/** The ten column arrays of insertUnsequenced, in the events' order. */
export function unsequencedEventParams(events: readonly EventDraft[]): unknown[][] {
  return [
    events.map((e) => e.jobId),
    events.map((e) => e.queue),
    events.map((e) => e.kind),
    events.map((e) => e.fromState),
    events.map((e) => e.toState),
    events.map((e) => e.eventTime),
    events.map((e) => e.workerId),
    events.map((e) => e.attempt),
    events.map((e) => e.message),
    events.map((e) => e.groupKey),
  ];
}
