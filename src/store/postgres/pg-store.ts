/**
 * The PostgreSQL store (docs/postgresql.md "The store"): the engine-neutral
 * write operations (store/operations/) over the PostgreSQL port (pg-port.ts),
 * run by group commit on a pool (pg-transactions.ts); the reads; and the
 * announcements of what every server committed. Any number of stores (on any
 * number of servers) may share one schema.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { hostClock, type Clock } from "../../domain/clock.js";
import { publicJob, type EventDraft, type Job, type JobEvent, type JobState } from "../../domain/job.js";
import type { QueueConfig } from "../../domain/queue-limits.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { replayBounds } from "../reads/event-bounds.js";
import { toEvent } from "../rows/event-rows.js";
import { DatabaseClock } from "../database/database-clock.js";
import { OperationStore, type OperationStoreOptions } from "../writing/operation-store.js";
import type { PersistedChanges } from "../operations/operation-changes.js";
import { OrderedAnnouncer } from "../announcing/ordered-announcer.js";
import { KnownQueueControls, type QueueControlSnapshot } from "../reads/known-queue-controls.js";
import { toActivitySample } from "../rows/activity-columns.js";
import { assembleQueueCounts, queueBacklogOf, type QueueBacklogRow } from "../reads/queue-counts.js";
import type {
  GroupCounts,
  ListEventsSpec,
  ListGroupsSpec,
  ListJobsSpec,
  QueueActivity,
  QueueBacklog,
  QueueControlChange,
  QueueCounts,
  Store,
  WriteOutcome,
} from "../store.js";
import { operationOf, type WriteArgs, type WriteName, type WriteResult } from "../writing/write-calls.js";
import { QueueError } from "../../domain/errors.js";
import { EventSequencer } from "./event-sequencer.js";
import { quoteIdentifier } from "./identifiers.js";
import { isUuid, listJobsQuery, toStoredJob } from "./job-sql.js";
import { migratePostgres } from "./migrate.js";
import { NotificationListener, notificationChannel, type StoreNotification } from "./notifications.js";
import { isConnectionError, storeError } from "./pg-errors.js";
import { pgStatements, type PgStatements } from "./pg-statements.js";
import { toSchedule } from "./schedule-sql.js";
import { prepared, preparedArrays } from "./prepared.js";
import { PgTransactions } from "./pg-transactions.js";
import { clientConfig, createPool, type PgConnectionOptions } from "./pool.js";

export interface PgStoreOptions extends PgConnectionOptions, OperationStoreOptions {
  /** The schema (created and migrated unless `migrate` is false). */
  schema: string;
  /** Apply pending migrations before opening. Default true. */
  migrate?: boolean;
  /** Most operations sharing one transaction. Default 256. */
  maxBatch?: number;
  /** How often the store catches up with the tables and compacts counts (notifications make it rarely needed). Default 1000 ms. */
  catchUpIntervalMs?: number;
  /** Told when the listening connection fails (it reconnects by itself). */
  onListenerError?(error: Error, retryInMs: number): void;
  /**
   * `clock` is the host's clock; the store's clock follows the database's
   * (store/database/database-clock.ts), read with clock_timestamp() unless
   * `databaseClock` gives it (tests move one manual clock for the database
   * and give each instance a host clock of its own).
   */
  databaseClock?: Clock;
  /** How often the host clock's distance from the database's is measured again. Default 10,000 ms. */
  clockIntervalMs?: number;
  /** A measurement of the database's clock failed or was not trusted; the store keeps the last offset (ms, database minus host). */
  onClockUnmeasured?(reason: string, offsetMs: number): void;
}

/** Events read per query while catching up: listeners get them in bounded pieces. */
const READ_CHUNK = 1000;

/** The key that tells this store's own events among those it reads back. */
const ownKey = (e: EventDraft) => `${e.jobId}\0${e.kind}\0${e.toState}\0${e.eventTime}\0${e.attempt}`;

export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  if (options.migrate !== false) {
    const client = new pg.Client(clientConfig({ ...options, applicationName: "leasequeue-migrate" }));
    await client.connect();
    try {
      await migratePostgres(client, options.schema);
    } finally {
      await client.end().catch(() => {});
    }
  }
  const pool = createPool(options);
  const statements = pgStatements(options.schema);
  const reference = options.databaseClock;
  const clock = new DatabaseClock({
    host: hostClock(options.clock),
    readDatabaseTime:
      reference !== undefined ? (sent) => (sent(), Promise.resolve(reference.now())) : (sent) => readDatabaseTime(pool, sent),
    ...(options.clockIntervalMs !== undefined ? { intervalMs: options.clockIntervalMs } : {}),
    onUnmeasured: (reason, offsetMs) => options.onClockUnmeasured?.(reason, offsetMs),
  });
  try {
    const { latest, controls, schedules } = await readState(pool, statements);
    // Before the first operation: every time the store writes is the database's.
    await clock.measure();
    return new PgStore({ ...options, clock }, pool, statements, latest, controls, schedules, clock);
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}

/** The database's clock in ms since the epoch (clock_timestamp(): the time of the reading, not of a transaction's start). */
const DATABASE_TIME_SQL = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS t";

/** Reads the database's time on a connection of its own, calling `sent` once it has one (waiting for it is no part of the round trip). */
async function readDatabaseTime(pool: pg.Pool, sent: () => void): Promise<number> {
  const client = await pool.connect();
  try {
    sent();
    const { rows } = await client.query<{ t: number }>(prepared(DATABASE_TIME_SQL));
    client.release();
    return rows[0].t;
  } catch (err) {
    // A connection that failed is not given back for the next query to meet.
    client.release(err as Error);
    throw err;
  }
}

/**
 * Events and announcements (Store.onCommitted): events are committed
 * unnumbered and numbered right after by the sequencer (event-sequencer.ts),
 * whose runs are serial, so `job_events` only ever grows at its end, in
 * sequence order. Each store announces from `job_events` alone: it reads the
 * events after the last sequence it announced, up to the highest it heard
 * of, one reader at a time (store/announcing/ordered-announcer.ts), so every event is
 * announced once and in order, whoever committed it. It hears of new
 * sequences from its own sequencer runs, from `events` notifications (any
 * server's runs), and from the periodic catch-up that also covers lost
 * notifications and events an application's `submit()` left unnumbered.
 *
 * A store answers a write only after its events are numbered and
 * announced, so that a caller who reads next (ListJobEvents, a WatchEvents
 * resume) finds them. Its own events are told from other servers' by
 * matching them against what it committed (`external` is false for them).
 *
 * Counts and queue activity are deltas folded now and then (job-counts.ts,
 * queue-activity-sql.ts): each store runs both compactions in its
 * catch-up; the advisory locks in them let one server at a time do the work.
 */
export class PgStore extends OperationStore implements Store {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** This instance, in the origin of its queue-control notifications. */
  readonly origin = randomUUID();
  readonly #sql: PgStatements;
  readonly #transactions: PgTransactions;
  readonly #sequencer: EventSequencer;
  readonly #notifications: NotificationListener;
  #closed = false;
  /** The reader of job_events: one at a time, so announcements keep sequence order. */
  readonly #announcer: OrderedAnnouncer;
  /** This store's committed events not read back yet, by ownKey, with how many. */
  readonly #own = new Map<string, number>();
  /** The schedules table's signature at the last catch-up (rows and latest update), to see changes a lost notification missed. */
  #schedules: string;
  /** Paused queues as last announced, to announce other servers' changes that a lost notification missed. */
  readonly #controls: KnownQueueControls;
  /** Queues whose controls this store is committing now, with how many changes in flight. */
  readonly #controlsInFlight = new Map<string, number>();
  /** Counts the queue-control changes this store committed or was notified of, and the count at each queue's latest, so a catch-up knows what changed while it read. */
  #controlCommits = 0;
  readonly #controlCommitOf = new Map<string, number>();
  #catchingUp = false;
  /** Committed batches whose events are being numbered and announced before their callers are answered. */
  readonly #settling = new Set<Promise<void>>();
  readonly #databaseClock: DatabaseClock;

  constructor(
    options: PgStoreOptions,
    pool: pg.Pool,
    statements: PgStatements,
    latest: number,
    controls: QueueControlSnapshot,
    schedules: string,
    databaseClock: DatabaseClock,
  ) {
    super(options);
    this.#databaseClock = databaseClock;
    this.pool = pool;
    this.schema = options.schema;
    this.#sql = statements;
    this.#announcer = new OrderedAnnouncer({
      announcedThrough: latest,
      readAfter: async (after, limit) =>
        (await this.pool.query<Record<string, unknown>>(prepared(this.#sql.events.eventsAfter, [after, limit]))).rows.map(toEvent),
      listening: () => this.hasCommitListeners && !this.#closed,
      passedOver: () => this.#own.clear(),
      pageSize: READ_CHUNK,
    });
    this.#controls = new KnownQueueControls(controls);
    this.#schedules = schedules;
    this.#sequencer = new EventSequencer(pool, options.schema);
    this.#transactions = new PgTransactions({
      pool,
      statements,
      clock: options.clock,
      maxBatch: options.maxBatch ?? 256,
      // Leave connections for the sequencer and the reads.
      maxConcurrent: Math.max(1, options.poolSize - 2),
      origin: this.origin,
      committing: (events, queueControls) => {
        const disown = this.#expectOwn(events);
        const settle = this.#controlsCommitting(queueControls);
        return () => (disown(), settle());
      },
      committed: (changes, answer, outcome) => {
        const settling = this.#committed(changes, answer, outcome).finally(() => this.#settling.delete(settling));
        this.#settling.add(settling);
      },
      failed: (outcome) => this.reportWrite(outcome),
    });
    this.#notifications = new NotificationListener({
      client: clientConfig({ ...options, applicationName: "leasequeue-listener" }),
      channel: notificationChannel(options.schema),
      catchUpIntervalMs: options.catchUpIntervalMs ?? 1000,
      onNotification: (n) => this.#notified(n),
      onCatchUp: (reason) => {
        // After a reconnect the database may be another one (a failover): measure its clock again.
        if (reason === "connected") void databaseClock.measure();
        void this.#catchUp();
      },
      onConnectionError: (error, retryInMs) => options.onListenerError?.(error, retryInMs),
    });
    this.#notifications.start();
    databaseClock.start();
  }

  clockOffsetMs(): number {
    return this.#databaseClock.offsetMs;
  }

  /** Resolves once the store listens for other servers' commits. */
  whenListening(): Promise<void> {
    return this.#notifications.whenListening();
  }

  // ---------------------------------------------------------------- writes

  protected runWrite<N extends WriteName>(name: N, args: WriteArgs<N>): Promise<WriteResult<N>> {
    if (this.#closed) return Promise.reject(new QueueError("STORE_UNAVAILABLE", "the store is closed"));
    return this.#transactions.write(operationOf(name, args));
  }

  // -------------------------------------------------------- announcements

  /**
   * Marks events about to be committed as this store's, before their COMMIT
   * is sent: its notification may be heard (and the events read back) before
   * the COMMIT's answer arrives. Returns the withdrawal for a batch that did
   * not commit.
   */
  #expectOwn(events: readonly EventDraft[]): () => void {
    if (!this.hasCommitListeners || events.length === 0) return () => {};
    const keys = events.map(ownKey);
    for (const key of keys) this.#own.set(key, (this.#own.get(key) ?? 0) + 1);
    return () => {
      for (const key of keys) this.#disown(key);
    };
  }

  /**
   * Queue controls about to be committed: in flight until the commit is
   * announced (or withdrawn), so that a catch-up reading the database
   * meanwhile neither announces them as another server's nor takes the
   * state before them for a change back.
   */
  #controlsCommitting(controls: readonly QueueControlChange[]): () => void {
    if (controls.length === 0) return () => {};
    const commit = ++this.#controlCommits;
    for (const { queue } of controls) {
      this.#controlsInFlight.set(queue, (this.#controlsInFlight.get(queue) ?? 0) + 1);
      this.#controlCommitOf.set(queue, commit);
    }
    return () => this.#controlsCommitted(controls);
  }

  #controlsCommitted(controls: readonly QueueControlChange[]): void {
    for (const { queue } of controls) {
      const n = this.#controlsInFlight.get(queue);
      if (n === undefined) continue;
      if (n <= 1) this.#controlsInFlight.delete(queue);
      else this.#controlsInFlight.set(queue, n - 1);
    }
  }

  /** Takes one event of this key off this store's own; false when none was. */
  #disown(key: string): boolean {
    const owned = this.#own.get(key);
    if (owned === undefined) return false;
    if (owned <= 1) this.#own.delete(key);
    else this.#own.set(key, owned - 1);
    return true;
  }

  /** A batch committed: number its events, announce them (with everything before them), then answer. */
  async #committed(changes: PersistedChanges, answer: () => void, outcome: WriteOutcome | undefined): Promise<void> {
    if (outcome !== undefined) this.reportWrite(outcome);
    if (changes.events.length > 0) {
      const numbered = changes.events[0].sequence > 0;
      try {
        if (numbered) await this.#readThrough(changes.events.at(-1)!.sequence, changes.events);
        else await this.#readThrough(await this.#sequencer.sequence());
      } catch {
        // Committed, but not numbered now (the database went away after the
        // COMMIT): the catch-up numbers and announces them once it is back.
      }
    }
    this.#controls.note(changes.queueControls);
    this.#controlsCommitted(changes.queueControls);
    this.announce({
      events: [],
      unrecorded: changes.unrecorded,
      queueControls: changes.queueControls,
      ...(changes.schedulesChanged === true ? { schedulesChanged: true } : {}),
      external: false,
    });
    answer();
  }

  #notified(n: StoreNotification): void {
    if (this.#closed) return;
    if (n.kind === "events") void this.#readThrough(n.through).catch(() => {});
    else if (n.kind === "submitted")
      void this.#sequencer
        .sequence()
        .then((through) => this.#readThrough(through))
        .catch(() => {});
    else if (n.kind === "schedules") {
      if (n.origin !== this.origin)
        this.announce({ events: [], unrecorded: [], queueControls: [], schedulesChanged: true, external: true });
    } else if (n.origin !== this.origin) {
      const control: QueueControlChange = { queue: n.queue, paused: n.paused, ...(n.config !== undefined ? { config: n.config } : {}) };
      // A catch-up reading now may have read the queue before this change: it leaves the queue as noted here.
      this.#controlCommitOf.set(n.queue, ++this.#controlCommits);
      // A catch-up that read the queue after this change already announced it.
      const fresh = this.#controls.note([control]);
      if (fresh.length > 0) this.announce({ events: [], unrecorded: [], queueControls: fresh, external: true });
    }
  }

  /** The periodic look (and the one after each (re)connect): whatever notifications missed. */
  async #catchUp(): Promise<void> {
    if (this.#closed || this.#catchingUp) return;
    this.#catchingUp = true;
    try {
      const commitsBefore = this.#controlCommits;
      const { latest, waiting, controls, schedules } = await readState(this.pool, this.#sql);
      const unsettled = new Set(this.#controlsInFlight.keys());
      for (const [queue, commit] of this.#controlCommitOf) if (commit > commitsBefore) unsettled.add(queue);
      const changed = this.#controls.changesTo(controls, unsettled);
      // A schedule change whose notification was lost (or made while this store was not listening).
      const schedulesChanged = schedules !== this.#schedules;
      this.#schedules = schedules;
      if (changed.length > 0 || schedulesChanged) {
        this.announce({
          events: [],
          unrecorded: [],
          queueControls: changed,
          ...(schedulesChanged ? { schedulesChanged } : {}),
          external: true,
        });
      }
      await this.#readThrough(waiting ? await this.#sequencer.sequence() : latest);
      await this.pool.query(prepared(this.#sql.counts.compact));
      await this.pool.query(prepared(this.#sql.activity.compact));
    } catch {
      // The database is unreachable now: the next interval tries again.
    } finally {
      this.#catchingUp = false;
    }
  }

  /**
   * Announces every numbered event up to `through` not announced yet, in
   * order; resolves once they are. `numbered`: this store's own events just
   * numbered in its transaction, ending at `through`: when they follow the
   * last announced event directly, they are announced without reading them
   * back.
   */
  async #readThrough(through: number, numbered?: readonly JobEvent[]): Promise<void> {
    await this.#announcer.announceThrough(through, (events) => this.#announceEvents(events), numbered);
  }

  /** Announces read events in runs of the same origin, so each change says whether it was this store's. */
  #announceEvents(events: JobEvent[]): void {
    let run: JobEvent[] = [];
    let runExternal = false;
    for (const e of events) {
      const external = !this.#disown(ownKey(e));
      if (run.length > 0 && external !== runExternal) {
        this.announce({ events: run, unrecorded: [], queueControls: [], external: runExternal });
        run = [];
      }
      runExternal = external;
      run.push(e);
    }
    if (run.length > 0) this.announce({ events: run, unrecorded: [], queueControls: [], external: runExternal });
  }

  // ----------------------------------------------------------------- reads

  /** A read on the pool; one that met a connection that died while idle is tried once more on a fresh one. */
  async #read<R extends pg.QueryResultRow>(text: string, values: unknown[], rowMode?: "array"): Promise<R[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        const result =
          rowMode === undefined ? await this.pool.query<R>(prepared(text, values)) : await this.pool.query(preparedArrays(text, values));
        return result.rows as R[];
      } catch (err) {
        if (attempt === 0 && isConnectionError(err)) continue;
        throw storeError(err);
      }
    }
  }

  async getJob(jobId: string): Promise<Job | undefined> {
    if (!isUuid(jobId)) return undefined;
    const [row] = await this.#read<unknown[]>(this.#sql.jobs.jobById, [jobId], "array");
    return row === undefined ? undefined : publicJob(toStoredJob(row));
  }

  async listJobs(spec: ListJobsSpec): Promise<Job[]> {
    const { text, values } = listJobsQuery(this.schema, spec);
    return (await this.#read<unknown[]>(text, values, "array")).map((r) => publicJob(toStoredJob(r)));
  }

  async listJobEvents(jobId: string): Promise<JobEvent[]> {
    if (!isUuid(jobId)) return [];
    return (await this.#read(this.#sql.events.eventsOfJob, [jobId])).map(toEvent);
  }

  async listEvents(spec: ListEventsSpec): Promise<JobEvent[]> {
    const rows =
      spec.jobId !== undefined
        ? isUuid(spec.jobId)
          ? await this.#read(this.#sql.events.eventsOfJobAfter, [spec.jobId, spec.afterSequence, spec.limit, spec.queue ?? null])
          : []
        : spec.queue !== undefined
          ? await this.#read(this.#sql.events.eventsOfQueueAfter, [spec.queue, spec.afterSequence, spec.limit])
          : await this.#read(this.#sql.events.eventsAfter, [spec.afterSequence, spec.limit]);
    return rows.map(toEvent);
  }

  async eventBounds(): Promise<{ oldest: number; latest: number }> {
    const [row] = await this.#read<{ oldest: number; latest: number; pruned_through: number }>(this.#sql.events.eventBounds, []);
    return replayBounds({ oldestStored: row.oldest, latestIssued: row.latest, prunedThrough: row.pruned_through });
  }

  async queueCounts(): Promise<QueueCounts[]> {
    const now = this.clock.now();
    const [counts, paused, configs] = await Promise.all([
      this.#read<{ queue: string; state: JobState; count: number }>(this.#sql.counts.counts, []),
      this.#read<{ queue: string }>(this.#sql.jobs.pausedQueues, []),
      this.#read<{ queue: string } & QueueConfig>(this.#sql.limits.queueConfigs, []),
    ]);
    return assembleQueueCounts({
      counts,
      paused: paused.map((r) => r.queue),
      configs,
      oldestPendingSince: async (queue) => (await this.#read<{ t: number | null }>(this.#sql.jobs.oldestPendingSince, [queue, now]))[0].t,
    });
  }

  async queueActivity(queue: string, sinceMinute: number): Promise<QueueActivity> {
    // One statement: the samples and the counts of one snapshot.
    const [row] = await this.#read<{ samples: number[][]; counts: QueueActivity["counts"] }>(this.#sql.activity.queueActivity, [
      queue,
      sinceMinute,
    ]);
    return { samples: row.samples.map(([minute, ...values]) => toActivitySample(minute, values)), counts: row.counts };
  }

  async queueBacklog(queue: string): Promise<QueueBacklog> {
    const [row] = await this.#read<QueueBacklogRow>(this.#sql.counts.backlog, [queue, this.clock.now()]);
    return queueBacklogOf(row);
  }

  async listGroups(spec: ListGroupsSpec): Promise<GroupCounts[]> {
    return this.#read<GroupCounts>(this.#sql.limits.listGroups, [spec.queue, spec.afterKey, spec.limit]);
  }

  async countPendingGroups(queue: string): Promise<number> {
    return (await this.#read<{ n: number }>(this.#sql.limits.countPendingGroups, [queue]))[0].n;
  }

  async listSchedules(): Promise<StoredSchedule[]> {
    return (await this.#read<Record<string, unknown>>(this.#sql.schedules.allSchedules, [])).map(toSchedule);
  }

  async nextScheduleRunTime(): Promise<number | null> {
    return (await this.#read<{ t: number | null }>(this.#sql.schedules.nextScheduleRunTime, []))[0].t;
  }

  async lastJobId(queue: string, state: JobState): Promise<string | null> {
    return (await this.#read<{ id: string | null }>(this.#sql.jobs.lastJobId, [queue, state]))[0].id;
  }

  // ------------------------------------------------------------- lifecycle

  protected get isOpen(): boolean {
    return !this.#closed;
  }

  /** Commits what is queued, stops listening, closes the pool. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#databaseClock.stop();
    await this.#transactions.drain();
    await Promise.all(this.#settling);
    await this.#announcer.idle();
    this.clearCommitListeners();
    await this.#notifications.close();
    await this.pool.end().catch(() => {});
  }
}

/**
 * What a store reads to start and at each catch-up, in one statement (one
 * snapshot): the last sequence issued, whether events wait to be numbered,
 * and the queue controls.
 */
async function readState(
  pool: pg.Pool,
  sql: PgStatements,
): Promise<{ latest: number; waiting: boolean; controls: QueueControlSnapshot; schedules: string }> {
  const s = quoteIdentifier(sql.schema);
  const { rows } = await pool.query<{
    latest: number | null;
    waiting: boolean;
    paused: string[];
    configs: QueueControlSnapshot["configs"];
    schedules: string;
  }>(
    prepared(`SELECT (SELECT last_sequence FROM ${s}.event_sequence WHERE id = 1) AS latest,
      EXISTS (SELECT 1 FROM ${s}.unsequenced_events) AS waiting,
      ARRAY(SELECT queue FROM ${s}.paused_queues) AS paused,
      (SELECT coalesce(json_agg(c), '[]'::json) FROM (${sql.limits.queueConfigs}) c) AS configs,
      (SELECT count(*) || ':' || coalesce(max(update_time), 0) FROM ${s}.schedules) AS schedules`),
  );
  const row = rows[0];
  if (row === undefined || row.latest === null) throw new Error(`schema ${sql.schema} is not migrated`);
  return { latest: row.latest, waiting: row.waiting, controls: { paused: row.paused, configs: row.configs }, schedules: row.schedules };
}
