/**
 * The SQLite store (better-sqlite3, WAL, synchronous=FULL by default): the
 * engine-neutral write operations (store/operations/) over the SQLite port
 * (sqlite-port.ts), run by group commit (group-commit.ts) and made durable
 * by an fsync of the WAL off the event loop (wal-sync.ts); the reads; and
 * the announcements of what was committed.
 */
import Database from "better-sqlite3";
import { hostClock } from "../../domain/clock.js";
import { QueueError } from "../../domain/errors.js";
import type { Job, JobEvent, JobState } from "../../domain/job.js";
import { publicJob } from "../../domain/job.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { watchClockJumps } from "../database/database-clock.js";
import { DatabaseRefusal } from "../database/database-refusal.js";
import { listedStates } from "../reads/job-listing.js";
import { replayBounds } from "../reads/event-bounds.js";
import { OperationStore, type OperationStoreOptions } from "../writing/operation-store.js";
import type { PersistedChanges } from "../operations/operation-changes.js";
import { OrderedAnnouncer } from "../announcing/ordered-announcer.js";
import type { WriteOperation } from "../operations/scope.js";
import { toActivitySample } from "../rows/activity-columns.js";
import { assembleQueueCounts, queueBacklogOf, type QueueBacklogRow } from "../reads/queue-counts.js";
import { operationOf, type WriteArgs, type WriteName, type WriteResult } from "../writing/write-calls.js";
import { settledNow } from "../operations/steps.js";
import type {
  CommittedChange,
  GroupCounts,
  QueueActivity,
  ListEventsSpec,
  ListGroupsSpec,
  ListJobsSpec,
  QueueBacklog,
  QueueCounts,
  Store,
  WriteOutcome,
} from "../store.js";
import { BUSY_SLICE_MS, GroupCommit } from "./group-commit.js";
import { DatabaseFileWatch, refuseNewBesideSavedCopy, type DatabaseFileReport } from "./lost-file.js";
import { migrate } from "./migrate.js";
import { OtherWriters } from "./other-writers.js";
import { toEvent, toSchedule, toStoredJob, type JobRow, type Row } from "./rows.js";
import { configFromRow, listJobsSql, prepareStatements, type QueueConfigRow, type SqliteStatements } from "./sql.js";
import { SqlitePort } from "./sqlite-port.js";
import { WalSync, type DurableSettle } from "./wal-sync.js";
import { otherWriteFailure, writeFailureOf } from "./write-failures.js";

export interface SqliteStoreOptions extends OperationStoreOptions {
  /** Database file, or ":memory:". */
  path: string;
  /** SQLite synchronous mode. Default "full": every commit is fsynced. */
  synchronous?: "full" | "normal";
  /** How long a writer waits for a lock held by another process. Default 5000 ms. */
  busyTimeoutMs?: number;
  /** Most operations sharing one transaction. Default 256. */
  maxBatch?: number;
  /**
   * How often the store looks for commits made through other connections to
   * the file, to announce them (other-writers.ts; one PRAGMA, no page read).
   * They are also found at each of this store's own transactions. Default 100 ms.
   */
  otherWritersPollMs?: number;
  /**
   * Told when the host's wall clock jumps against its monotonic clock by
   * more than a second (size in ms, negative when it went back): the
   * store's only clock is the host's, so lease expiry, delays and
   * schedules move with it.
   */
  onClockJump?(jumpMs: number): void;
  /**
   * How often the store looks that its path still names the database file
   * it opened (lost-file.ts; it also looks before answering each commit).
   * Default 250 ms.
   */
  fileCheckIntervalMs?: number;
  /** Told when the database file is lost (removed, renamed, replaced), saved, and back (lost-file.ts). */
  onDatabaseFile?(report: DatabaseFileReport): void;
}

/** Events per announcement of other writers' commits, so that a long catch-up reaches listeners in bounded pieces. */
const OTHER_WRITERS_CHUNK = 1000;

export function openSqliteStore(options: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(options);
}

/**
 * Announcements (Store.onCommitted): this store's own commits once they
 * are durable, and the commits of other connections to the same file
 * (other-writers.ts: a second store in this process, `leasequeue prune`),
 * all through one queue in commit order, so every event is announced once,
 * in sequence order (other writers' events are read by
 * store/announcing/ordered-announcer.ts).
 *
 * Write health (readiness, docs/api.md "Side port"): each transaction that
 * changed something or failed is reported to onWriteOutcome listeners, with
 * the cause of a failure (disk full, I/O error, busy, read-only). A BEGIN
 * IMMEDIATE alone needs no write I/O in WAL mode, so it cannot tell a full
 * disk; checkWritable answers from the latest real commit instead, and when
 * none happened within `writeProbeIntervalMs` it commits one row of
 * `write_probe` (one page, fsynced like any commit) to find out.
 *
 * The database file's name (lost-file.ts): before each commit is answered,
 * and on a timer, the store checks that its path still names the file it
 * opened; once it does not, writes are refused and a copy is saved.
 *
 * Several stores may open one file; "one server per file" is the server's
 * rule (store/engine.ts holdDatabase). migrate() refuses a database whose
 * schema is newer than this release's last migration (store/database/schema-version.ts).
 */
export class SqliteStore extends OperationStore implements Store {
  readonly db: Database.Database;
  #closed = false;
  readonly #stmts: SqliteStatements;
  readonly #listCache = new Map<string, Database.Statement>();
  /**
   * How a commit becomes durable before its callers are answered:
   * "wal-fsync" (synchronous full) or "none" (synchronous normal: a power
   * loss may take the latest commits, a killed process does not).
   */
  readonly durability: "wal-fsync" | "none";
  /** How long a write waits for another connection's write lock before it is refused as busy. */
  readonly busyTimeoutMs: number;
  readonly #walSync: WalSync;
  readonly #groupCommit: GroupCommit;
  readonly #otherWriters: OtherWriters;
  readonly #otherWritersTimer: NodeJS.Timeout;
  /** The highest sequence whose event is announced or queued for announcement (own or another writer's), and the reader of other writers' events after it. */
  readonly #announcer: OrderedAnnouncer;
  /** Whether the group commit has a transaction open now; what would be announced meanwhile waits for its end. */
  #transactionOpen = false;
  #heldUntilEnd: Array<() => void> = [];
  readonly #stopClockWatch: (() => void) | undefined;
  /** Whether the path still names the open file (undefined for ":memory:"). */
  readonly #fileWatch: DatabaseFileWatch | undefined;

  constructor(options: SqliteStoreOptions) {
    super(options);
    refuseNewBesideSavedCopy(options.path);
    const busyTimeoutMs = (this.busyTimeoutMs = options.busyTimeoutMs ?? 5000);
    // SQLite's own busy wait holds the event loop: a slice only; group commit waits out the rest (group-commit.ts).
    this.db = new Database(options.path, { timeout: Math.min(BUSY_SLICE_MS, busyTimeoutMs) });
    try {
      this.db.pragma("journal_mode = WAL");
      // "full" is kept by fsyncing the WAL after each COMMIT off the event loop (wal-sync.ts).
      this.db.pragma("synchronous = NORMAL");
      this.durability = options.synchronous === "normal" || options.path === ":memory:" ? "none" : "wal-fsync";
      this.db.pragma("foreign_keys = ON");
      // Savepoints (the guarded replay of a batch) keep their undo pages in
      // memory instead of a temporary file.
      this.db.pragma("temp_store = MEMORY");
      migrate(this.db);
      this.#stmts = prepareStatements(this.db);
    } catch (err) {
      this.db.close();
      throw openFailure(options.path, err);
    }
    this.#stopClockWatch =
      options.onClockJump === undefined
        ? undefined
        : watchClockJumps({ host: hostClock(options.clock), onJump: (ms) => options.onClockJump?.(ms) });
    // While the WAL's fsync runs, new writes wait and then share one
    // transaction (and the next fsync) instead of committing one by one.
    this.#walSync = new WalSync(`${options.path}-wal`, () => this.#groupCommit.resume());
    this.#otherWriters = new OtherWriters(this.#stmts);
    this.#announcer = new OrderedAnnouncer({
      announcedThrough: this.#otherWriters.latestSequence(),
      readAfter: (after, limit) => this.#otherWriters.eventsAfter(after, limit),
      listening: () => this.hasCommitListeners,
      pageSize: OTHER_WRITERS_CHUNK,
    });
    this.#groupCommit = new GroupCommit({
      db: this.db,
      port: new SqlitePort(this.db, this.#stmts),
      clock: this.clock,
      maxBatch: options.maxBatch ?? 256,
      busyTimeoutMs,
      began: () => {
        this.#transactionOpen = true;
        return this.#catchUpWithOtherWriters();
      },
      ended: () => {
        this.#transactionOpen = false;
        for (const settle of this.#heldUntilEnd.splice(0)) settle();
      },
      committed: (changes, answer, outcome) => this.#committed(changes, answer, outcome),
      failed: (outcome) => this.reportWrite(outcome),
      held: () => this.durability === "wal-fsync" && this.#walSync.syncing,
    });
    this.#otherWritersTimer = setInterval(() => this.#lookForOtherWriters(), options.otherWritersPollMs ?? 100);
    this.#otherWritersTimer.unref();
    this.#fileWatch =
      options.path === ":memory:"
        ? undefined
        : new DatabaseFileWatch({
            path: options.path,
            db: this.db,
            intervalMs: options.fileCheckIntervalMs ?? 250,
            ...(options.monotonicNow !== undefined ? { monotonicNow: options.monotonicNow } : {}),
            changed: (lost) => {
              if (lost !== undefined) this.reportWrite({ ok: false, cause: "file_lost", message: lost.message });
            },
            report: (report) => options.onDatabaseFile?.(report),
          });
  }

  // ---------------------------------------------------------------- writes

  protected runWrite<N extends WriteName>(name: N, args: WriteArgs<N>): Promise<WriteResult<N>> {
    return this.write(operationOf(name, args));
  }

  /** Queues one write operation for the next transaction. */
  write<T>(op: WriteOperation<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new QueueError("STORE_UNAVAILABLE", "the store is closed"));
    const lost = this.#fileWatch?.lost;
    if (lost !== undefined) return Promise.reject(lost);
    return this.#groupCommit.write(op);
  }

  // -------------------------------------------------------- announcements

  /** A batch committed: answer its callers once it is durable, then announce it. */
  #committed(changes: PersistedChanges, answer: (error?: unknown) => void, outcome: WriteOutcome | undefined): void {
    const last = changes.events.at(-1);
    if (last !== undefined) this.#announcer.announcedUpTo(last.sequence);
    this.#otherWriters.noteOwn(changes.queueControls);
    this.#whenDurable((syncError) => {
      if (syncError !== undefined) {
        // Committed, but not known to be on disk: answer as for a failed COMMIT.
        answer(syncError);
        this.reportWrite(writeFailureOf(syncError) ?? otherWriteFailure(syncError));
        return;
      }
      // Committed into a file no path names any more: not kept unless saved, so not acknowledged.
      const lost = this.#fileWatch?.check();
      if (lost !== undefined) {
        answer(lost);
        return;
      }
      answer();
      if (outcome !== undefined) this.reportWrite(outcome);
      this.announce({ ...changes, external: false });
    });
  }

  /**
   * Runs `settle` once everything committed so far is on disk (without
   * fsync: at once, or when the open transaction ends), so that answers and
   * announcements never run inside a transaction, and in commit order.
   */
  #whenDurable(settle: DurableSettle): void {
    if (this.durability === "wal-fsync") this.#walSync.whenDurable(settle);
    else if (this.#transactionOpen) this.#heldUntilEnd.push(() => settle());
    else settle();
  }

  /**
   * At each BEGIN (under the write lock): events other writers committed
   * since the last look are announced before this transaction's own.
   * Returns the highest sequence issued so far.
   */
  #catchUpWithOtherWriters(): number {
    const latest = this.#otherWriters.latestSequence();
    if (latest > this.#announcer.announcedThrough) this.#announceOtherWriters(latest, []);
    return latest;
  }

  /** The timer's look: anything committed through another connection since the last one is announced. */
  #lookForOtherWriters(): void {
    if (this.#closed) return;
    try {
      const version = this.#otherWriters.changedVersion();
      if (version === undefined) return;
      // One read transaction: the events and the paused queues of one snapshot.
      this.db.transaction(() => {
        const controls = this.#otherWriters.queueControlChanges();
        this.#announceOtherWriters(this.#otherWriters.latestSequence(), controls, this.#otherWriters.schedulesChanged());
      })();
      this.#otherWriters.acknowledge(version);
    } catch {
      // The database cannot be read now (busy, I/O): the next look tries again.
    }
  }

  /** Queues the announcement of other writers' events up to `latest` (and their queue controls), in sequence order. */
  #announceOtherWriters(latest: number, controls: QueueControlChanges, schedulesChanged = false): void {
    // The queue controls and schedules go with the first piece.
    let first: Pick<CommittedChange, "queueControls" | "schedulesChanged"> | undefined = {
      queueControls: controls,
      ...(schedulesChanged ? { schedulesChanged: true } : {}),
    };
    const queue = (events: JobEvent[]) => {
      const change: CommittedChange = { events, unrecorded: [], queueControls: [], ...first, external: true };
      first = undefined;
      this.#whenDurable(() => this.announce(change));
    };
    settledNow(this.#announcer.announceThrough(latest, queue));
    if (first !== undefined && (controls.length > 0 || schedulesChanged)) queue([]);
  }

  /** WAL fsyncs started since the store opened: with group commit, far fewer than the writes answered. */
  get walSyncs(): number {
    return this.#walSync.syncs;
  }

  // ----------------------------------------------------------------- reads
  // The Store interface is asynchronous (a PostgreSQL store answers later);
  // SQLite answers at once, and an async method still turns a thrown error
  // into a rejected promise, as callers expect.
  /* eslint-disable @typescript-eslint/require-await */

  async getJob(jobId: string): Promise<Job | undefined> {
    const row = this.#stmts.jobById.get(jobId) as JobRow | undefined;
    return row === undefined ? undefined : publicJob(toStoredJob(row));
  }

  async listJobs(spec: ListJobsSpec): Promise<Job[]> {
    const states = listedStates(spec);
    const shape = {
      queue: spec.queue !== undefined,
      group: spec.groupKey !== undefined,
      states: states.length,
      before: spec.beforeId !== undefined,
      dependenciesOf: spec.dependenciesOf !== undefined,
      dependentsOf: spec.dependentsOf !== undefined,
    };
    const key = JSON.stringify(shape);
    let stmt = this.#listCache.get(key);
    if (stmt === undefined) {
      stmt = this.db.prepare(listJobsSql(shape)).raw(true);
      this.#listCache.set(key, stmt);
    }
    const params: Record<string, unknown> = { limit: spec.limit };
    if (spec.queue !== undefined) params.queue = spec.queue;
    if (spec.beforeId !== undefined) params.before = spec.beforeId;
    if (spec.groupKey !== undefined) params.group = spec.groupKey;
    if (spec.dependenciesOf !== undefined) params.dependenciesOf = spec.dependenciesOf;
    if (spec.dependentsOf !== undefined) params.dependentsOf = spec.dependentsOf;
    states.forEach((s, i) => (params[`state${i}`] = s));
    return (stmt.all(params) as JobRow[]).map((r) => publicJob(toStoredJob(r)));
  }

  async listJobEvents(jobId: string): Promise<JobEvent[]> {
    return (this.#stmts.eventsOfJob.all(jobId) as Row[]).map(toEvent);
  }

  async listEvents(spec: ListEventsSpec): Promise<JobEvent[]> {
    const params = { after: spec.afterSequence, limit: spec.limit };
    const rows = (
      spec.jobId !== undefined
        ? this.#stmts.eventsOfJobAfter.all({ ...params, jobId: spec.jobId, queue: spec.queue ?? null })
        : spec.queue !== undefined
          ? this.#stmts.eventsOfQueueAfter.all({ ...params, queue: spec.queue })
          : this.#stmts.eventsAfter.all(params)
    ) as Row[];
    return rows.map(toEvent);
  }

  async eventBounds(): Promise<{ oldest: number; latest: number }> {
    // One read transaction, so the three agree even while another process prunes.
    return this.db.transaction(() =>
      replayBounds({
        oldestStored: (this.#stmts.eventBounds.get() as { oldest: number }).oldest,
        latestIssued: (this.#stmts.lastSequence.get() as { seq: number }).seq,
        prunedThrough: (this.#stmts.prunedThrough.get() as { seq: number }).seq,
      }),
    )();
  }

  async queueCounts(): Promise<QueueCounts[]> {
    const now = this.clock.now();
    return assembleQueueCounts({
      counts: this.#stmts.counts.all() as Array<{ queue: string; state: JobState; count: number }>,
      paused: (this.#stmts.pausedQueues.all() as Array<{ queue: string }>).map((r) => r.queue),
      configs: (this.#stmts.queueConfigs.all() as Array<QueueConfigRow & { queue: string }>).map(configFromRow),
      oldestPendingSince: (queue) => (this.#stmts.oldestPendingSince.get(queue, now) as { t: number | null }).t,
    });
  }

  async queueActivity(queue: string, sinceMinute: number): Promise<QueueActivity> {
    // One read transaction: the counts the gauges are counted back from, and the samples, of one snapshot.
    return this.db.transaction(() => {
      const counts = { queued: 0, retry: 0, running: 0 };
      for (const row of this.#stmts.gaugeCounts.all(queue) as Array<{ state: keyof typeof counts; count: number }>) {
        counts[row.state] = row.count;
      }
      const samples = (this.#stmts.activitySince.all(queue, sinceMinute) as number[][]).map(([minute, ...values]) =>
        toActivitySample(minute, values),
      );
      return { samples, counts };
    })();
  }

  async queueBacklog(queue: string): Promise<QueueBacklog> {
    const row = this.#stmts.queueBacklog.get({ queue, now: this.clock.now() }) as Omit<QueueBacklogRow, "paused"> & { paused: number };
    return queueBacklogOf({ ...row, paused: row.paused === 1 });
  }

  async listGroups(spec: ListGroupsSpec): Promise<GroupCounts[]> {
    return this.#stmts.listGroups.all(spec.queue, spec.afterKey, spec.limit) as GroupCounts[];
  }

  async countPendingGroups(queue: string): Promise<number> {
    return (this.#stmts.countPendingGroups.get({ queue }) as { n: number }).n;
  }

  async listSchedules(): Promise<StoredSchedule[]> {
    return (this.#stmts.allSchedules.all() as Row[]).map(toSchedule);
  }

  async nextScheduleRunTime(): Promise<number | null> {
    const { t } = this.#stmts.nextScheduleRunTime.get() as { t: number | null };
    return t;
  }

  async lastJobId(queue: string, state: JobState): Promise<string | null> {
    const { id } = this.#stmts.lastJobId.get(queue, state) as { id: string | null };
    return id;
  }
  /* eslint-enable @typescript-eslint/require-await */

  // ------------------------------------------------------------- lifecycle

  protected get isOpen(): boolean {
    return !this.#closed && this.db.open;
  }

  /** Commits what is queued, then closes the database (checkpointing the WAL). */
  clockOffsetMs(): number {
    return 0;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopClockWatch?.();
    clearInterval(this.#otherWritersTimer);
    await this.#fileWatch?.close();
    this.#groupCommit.flushNow();
    // Answer every commit only once it is on disk, then stop.
    await this.#walSync.drain();
    this.clearCommitListeners();
    this.#walSync.close();
    this.db.close();
  }
}

type QueueControlChanges = CommittedChange["queueControls"];

/** An open that found the file locked by a process with sole use of it (a restore or an import) is refused as IN_USE. */
function openFailure(path: string, err: unknown): unknown {
  if (err instanceof Database.SqliteError && err.code.startsWith("SQLITE_BUSY")) {
    return new DatabaseRefusal(
      "IN_USE",
      `${path} is locked by another process (a restore or an import has sole use of it, or a writer holds it too long); try again once it is done`,
    );
  }
  return err;
}
