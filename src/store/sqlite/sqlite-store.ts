/**
 * The SQLite store (better-sqlite3, WAL, synchronous=FULL by default).
 *
 * Write path (group commit): every mutating call becomes an operation queued
 * on the store. On the next turn of the event loop all queued operations run
 * in ONE `BEGIN IMMEDIATE` transaction, each inside its own SAVEPOINT so a
 * refused operation rolls back alone, and then one COMMIT (one fsync) makes
 * them all durable. Only after the commit are the callers' promises settled
 * and the committed events announced to onCommitted listeners, so nothing is
 * acknowledged before it is on disk. Concurrent requests therefore share
 * fsyncs without the service knowing.
 *
 * Write health (readiness, api.md "Side port"): each transaction that
 * changed something or failed is reported to onWriteOutcome listeners, with
 * the cause of a failure (disk full, I/O error, busy, read-only). A BEGIN
 * IMMEDIATE alone needs no write I/O in WAL mode, so it cannot tell a full
 * disk; checkWritable answers from the latest real commit instead, and when
 * none happened within `writeProbeIntervalMs` it commits one row of
 * `write_probe` (one page, fsynced like any commit) to find out.
 *
 * Ownership: an open store holds `<db>.lock` (database-lock.ts), so that
 * `leasequeue restore` and `import-litequeue` refuse to run under it and a
 * second server on the same file refuses to start (its dispatch would not
 * see this one's commits). migrate() refuses a database whose schema is
 * newer than this release's last migration (store/schema-version.ts).
 */
import { fstatSync, fsync, fsyncSync, openSync, closeSync, statSync } from "node:fs";
import Database from "better-sqlite3";
import type { Clock } from "../../domain/clock.js";
import { jobNotFound, QueueError } from "../../domain/errors.js";
import type { EventDraft, Job, JobEvent, JobState, StoredJob } from "../../domain/job.js";
import { JOB_STATES, publicJob } from "../../domain/job.js";
import { newJobId } from "../../domain/ids.js";
import { newLeaseToken } from "../../domain/lease-token.js";
import * as machine from "../../domain/state-machine.js";
import { scheduleTimeOf, submitFingerprint, type NewJob } from "../../domain/submission.js";
import type { PrunableState } from "../../domain/retention.js";
import { bulkTransitionOf } from "../bulk-transitions.js";
import type {
  BulkBatchOutcome,
  BulkBatchSpec,
  ClaimedLease,
  ClaimRequestSpec,
  CommitListener,
  ListEventsSpec,
  ListJobsSpec,
  PrunedJobs,
  PruneOutcome,
  PruneSpec,
  QueueControlChange,
  QueueCounts,
  Store,
  SubmitOutcome,
  WriteFailureCause,
  WriteOutcome,
  WriteOutcomeListener,
} from "../store.js";
import { assertSchemaNotNewer } from "../schema-version.js";
import { acquireDatabaseLock, type DatabaseLock } from "./database-lock.js";
import { MIGRATIONS } from "./migrations.js";
import { EVENT_INSERT_SIZES, insertEventsSql, JOB_ROW_STATEMENTS, listJobsSql, SQL } from "./sql.js";

export interface SqliteStoreOptions {
  /** Database file, or ":memory:". */
  path: string;
  clock: Clock;
  /** SQLite synchronous mode. Default "full": every commit is fsynced. */
  synchronous?: "full" | "normal";
  /**
   * Whether this store owns the database: takes `<db>.lock` (database-lock.ts)
   * for as long as it is open. Default true. False opens it beside its owner
   * (a running server), for `leasequeue prune`, whose commits only delete
   * finished jobs, which the owner's streams need not be told about. restore
   * and import still refuse to run meanwhile: they need an exclusive lock on
   * the file itself, which this store's open connection denies.
   */
  ownsDatabase?: boolean;
  /** How long a writer waits for a lock held by another process. Default 5000 ms. */
  busyTimeoutMs?: number;
  /** Most operations sharing one transaction. Default 256. */
  maxBatch?: number;
  /** Most expired leases recovered by one sweep transaction. Default 500. */
  maxRecoveredPerSweep?: number;
  /**
   * How long the outcome of the latest write answers checkWritable; older
   * than this, checkWritable makes a probe write. So probes cost at most one
   * small commit per interval, and none while real writes flow. Default 1000 ms.
   */
  writeProbeIntervalMs?: number;
  /** Monotonic milliseconds for the probe interval (not domain time). Default performance.now. */
  monotonicNow?: () => number;
}

interface Pending<T = unknown> {
  op: (tx: Tx) => T;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

/**
 * What one operation sees: the time of its transaction, the events it
 * recorded, and its changes to the per-queue counts (summed, written once
 * per transaction for all its operations).
 */
interface Tx {
  now: number;
  events: JobEvent[];
  /** Heartbeats applied without a stored event (the heartbeat policy). */
  unrecorded: EventDraft[];
  /** Events of the operations before this one in the same transaction, not yet written (see #writeEvents). */
  pending: readonly JobEvent[];
  counts: CountDeltas;
  /** Queues the operation paused or resumed, announced with the commit. */
  queueControls: QueueControlChange[];
  /**
   * Set by the first row the operation writes. Operations decide every
   * refusal before they write (the state machine runs before the UPDATE), so
   * a refused operation normally leaves nothing to roll back.
   */
  wrote: boolean;
}

/** Count changes by queue and state: `queue + "\0" + state` -> delta. */
type CountDeltas = Map<string, number>;

type Row = Record<string, unknown>;

/** SQLite error codes that mean "the database cannot take writes now", not a bug. */
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/;

/** The cause of a failed write, from the SQLite (extended) error code. */
export function writeFailureCause(code: string): WriteFailureCause {
  if (code.startsWith("SQLITE_FULL")) return "disk_full";
  if (code.startsWith("SQLITE_IOERR")) return "io_error";
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "busy";
  if (code.startsWith("SQLITE_READONLY")) return "readonly";
  return "other";
}

/** The failure a write error means for write health; undefined when it is a refusal or a bug, not the disk. */
function writeFailureOf(err: unknown): WriteOutcome | undefined {
  if (!(err instanceof Database.SqliteError) || !UNAVAILABLE_CODES.test(err.code)) return undefined;
  return { ok: false, cause: writeFailureCause(err.code), message: `${err.code}: ${err.message}` };
}

export function openSqliteStore(options: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(options);
}

/** The schema version this release's migrations end at. */
export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Applies pending migrations; returns the versions applied. Refuses
 * (DatabaseRefusal SCHEMA_TOO_NEW) a database that a newer release has
 * migrated past the last migration this one knows.
 */
export function migrate(db: Database.Database): number[] {
  const current = db.pragma("user_version", { simple: true }) as number;
  assertSchemaNotNewer(db.name, current, LATEST_SCHEMA_VERSION);
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
    applied.push(m.version);
  }
  return applied;
}

export class SqliteStore implements Store {
  readonly db: Database.Database;
  readonly #clock: Clock;
  readonly #maxBatch: number;
  readonly #maxRecovered: number;
  readonly #listeners = new Set<CommitListener>();
  readonly #writeListeners = new Set<WriteOutcomeListener>();
  readonly #writeProbeIntervalMs: number;
  readonly #monotonicNow: () => number;
  /** The latest reported write outcome and when (monotonic ms) it happened. */
  #lastWrite: { outcome: WriteOutcome; at: number } | undefined;
  /** The probe write in flight; concurrent checkWritable calls share it. */
  #probe: Promise<void> | undefined;
  #queue: Pending[] = [];
  #flushScheduled = false;
  #closed = false;
  readonly #stmts: Record<keyof typeof SQL, Database.Statement>;
  readonly #listCache = new Map<string, Database.Statement>();
  readonly #insertEventsCache = new Map<number, Database.Statement>();
  /**
   * How a commit becomes durable before its callers are answered:
   * "wal-fsync" (synchronous full) or "none" (synchronous normal: a power
   * loss may take the latest commits, a killed process does not).
   */
  readonly durability: "wal-fsync" | "none";
  readonly #walPath: string;
  /** Open descriptor of the WAL file, for fsync; opened at the first commit. */
  #walFd: number | undefined;
  /** Committed batches waiting for the next fsync, oldest first. */
  #awaitingSync: Array<(error?: unknown) => void> = [];
  #syncing = false;
  #synced: Promise<void> = Promise.resolve();
  #walSyncs = 0;
  /** The sequence the next recorded event gets; read from the database at each BEGIN. */
  #nextSequence = 0;
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;
  /** Held from open to close, so restore and import refuse to run under this store (see database-lock.ts). */
  readonly #lock: DatabaseLock | undefined;

  constructor(options: SqliteStoreOptions) {
    this.#clock = options.clock;
    this.#maxBatch = options.maxBatch ?? 256;
    this.#maxRecovered = options.maxRecoveredPerSweep ?? 500;
    this.#writeProbeIntervalMs = options.writeProbeIntervalMs ?? 1000;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    this.#lock =
      options.path === ":memory:" || options.ownsDatabase === false ? undefined : acquireDatabaseLock(options.path, busyTimeoutMs);
    try {
      this.db = new Database(options.path, { timeout: busyTimeoutMs });
    } catch (err) {
      this.#lock?.release();
      throw err;
    }
    try {
      this.db.pragma("journal_mode = WAL");
      // "full" is kept by fsyncing the WAL after each COMMIT off the event loop (see the top of this file).
      this.db.pragma("synchronous = NORMAL");
      this.durability = options.synchronous === "normal" || options.path === ":memory:" ? "none" : "wal-fsync";
      this.#walPath = `${options.path}-wal`;
      this.db.pragma("foreign_keys = ON");
      // Savepoints (the guarded replay of a batch) keep their undo pages in
      // memory instead of a temporary file.
      this.db.pragma("temp_store = MEMORY");
      migrate(this.db);
      const stmts = {} as Record<keyof typeof SQL, Database.Statement>;
      for (const [name, sql] of Object.entries(SQL)) stmts[name as keyof typeof SQL] = this.db.prepare(sql);
      for (const name of JOB_ROW_STATEMENTS) stmts[name].raw(true);
      this.#stmts = stmts;
      this.#savepoint = this.db.prepare("SAVEPOINT op");
      this.#release = this.db.prepare("RELEASE op");
      this.#rollbackTo = this.db.prepare("ROLLBACK TO op");
    } catch (err) {
      this.db.close();
      this.#lock?.release();
      throw err;
    }
  }

  // ---------------------------------------------------------------- writes

  submit(jobs: NewJob[]): Promise<SubmitOutcome[]> {
    return this.#write((tx) => {
      // Every refusal is decided before the first row is written (see Tx).
      const decided = this.#decideSubmits(tx, jobs);
      return decided.map((d) => {
        if (d.inserted) this.#insertJob(tx, d.job);
        return { job: publicJob(d.job), deduplicated: !d.inserted };
      });
    });
  }

  /**
   * Resolves each submission to a new job or the job its idempotency key
   * already names (stored, or earlier in the same batch). Reads only.
   */
  #decideSubmits(tx: Tx, specs: NewJob[]): Array<{ job: StoredJob; inserted: boolean }> {
    const inBatch = new Map<string, StoredJob>();
    return specs.map((spec) => {
      const requestHash = spec.idempotencyKey === null ? null : submitFingerprint(spec);
      if (spec.idempotencyKey !== null) {
        const scopedKey = `${spec.queue}\0${spec.idempotencyKey}`;
        let existing = inBatch.get(scopedKey);
        if (existing === undefined) {
          const row = this.#stmts.jobByIdempotencyKey.get(spec.queue, spec.idempotencyKey) as JobRow | undefined;
          if (row !== undefined) existing = toStoredJob(row);
        }
        if (existing !== undefined) {
          if (existing.requestHash !== requestHash) {
            throw new QueueError(
              "IDEMPOTENCY_MISMATCH",
              `idempotency_key was already used in queue "${spec.queue}" for a different request (job ${existing.id})`,
              { jobId: existing.id, queue: spec.queue },
            );
          }
          return { job: existing, inserted: false };
        }
      }
      const job = newStoredJob(spec, requestHash, tx.now);
      if (spec.idempotencyKey !== null) inBatch.set(`${spec.queue}\0${spec.idempotencyKey}`, job);
      return { job, inserted: true };
    });
  }

  #insertJob(tx: Tx, job: StoredJob): void {
    tx.wrote = true;
    this.#stmts.insertJob.run(jobRow(job));
    this.#adjustCount(tx, job.queue, job.state, 1);
    this.#recordEvents(tx, machine.submitted(job).events);
  }

  claim(spec: ClaimRequestSpec): Promise<ClaimedLease[]> {
    return this.#write((tx) => {
      this.#recoverExpired(tx, this.#stmts.expiredLeasesOfQueue.all(tx.now, spec.queue, this.#maxRecovered) as JobRow[]);
      // Walking jobs_claim_order also passes jobs scheduled for later; skip it
      // when nothing is eligible (an O(log n) look at jobs_pending_since).
      const { t } = this.#stmts.oldestPendingSince.get(spec.queue, tx.now) as { t: number | null };
      if (t === null) return [];
      // A paused queue hands out nothing, on every path that leases (api.md section B).
      if (this.#stmts.queuePaused.get(spec.queue) !== undefined) return [];
      const rows = this.#stmts.claimableJobs.all(spec.queue, tx.now, spec.maxJobs) as JobRow[];
      return rows.map((row) => {
        const { token, hash } = newLeaseToken();
        const before = toStoredJob(row);
        const t = machine.claim(before, tx.now, {
          workerId: spec.workerId,
          leaseDurationMs: spec.leaseDurationMs,
          tokenHash: hash,
        });
        this.#apply(tx, before.state, t);
        return { job: publicJob(t.job), leaseToken: token };
      });
    });
  }

  heartbeat(jobId: string, leaseToken: string, leaseDurationMs?: number): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.heartbeat(job, leaseToken, now, leaseDurationMs));
  }

  complete(jobId: string, leaseToken: string, resultJson: string | null): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.complete(job, leaseToken, now, resultJson));
  }

  fail(
    jobId: string,
    leaseToken: string,
    failure: { error: string; permanent: boolean; retryDelayMs?: number },
  ): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.fail(job, leaseToken, now, failure));
  }

  release(jobId: string, leaseToken: string): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.release(job, leaseToken, now));
  }

  redrive(jobId: string): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.redrive(job, now));
  }

  cancel(jobId: string, reason: string): Promise<Job> {
    return this.#transition(jobId, (job, now) => machine.cancel(job, now, reason));
  }

  recoverExpiredLeases(): Promise<number> {
    return this.#write((tx) =>
      this.#recoverExpired(tx, this.#stmts.expiredLeases.all(tx.now, this.#maxRecovered) as JobRow[]),
    );
  }

  pruneJobs(spec: PruneSpec): Promise<PruneOutcome> {
    return this.#write((tx) => {
      // A job whose events are still waiting to be written in this
      // transaction changed a moment ago: never due, and deleting it now
      // would orphan those events.
      const changedNow = new Set(tx.pending.map((e) => e.jobId));
      const due: Array<{ id: string; queue: string; state: PrunableState }> = [];
      for (const [state, before] of Object.entries(spec.finishedBefore) as Array<[PrunableState, number]>) {
        if (due.length >= spec.limit) break;
        const rows = this.#stmts.prunableJobs.all(state, before, spec.limit - due.length) as typeof due;
        for (const row of rows) if (!changedNow.has(row.id)) due.push(row);
      }
      let events = 0;
      let prunedThrough = 0;
      const byQueueState = new Map<string, PrunedJobs>();
      for (const job of due) {
        tx.wrote = true;
        for (const { sequence } of this.#stmts.deleteEventsOfJob.all(job.id) as Array<{ sequence: number }>) {
          events++;
          if (sequence > prunedThrough) prunedThrough = sequence;
        }
        this.#stmts.deleteJob.run(job.id);
        this.#adjustCount(tx, job.queue, job.state, -1);
        const key = `${job.queue}\0${job.state}`;
        const entry = byQueueState.get(key) ?? { queue: job.queue, state: job.state, jobs: 0 };
        entry.jobs++;
        byQueueState.set(key, entry);
      }
      if (prunedThrough > 0) this.#stmts.advancePrunedThrough.run(prunedThrough);
      return { pruned: [...byQueueState.values()], events, exhausted: due.length < spec.limit };
    });
  }

  pauseQueue(queue: string): Promise<boolean> {
    return this.#write((tx) => {
      const changed = this.#stmts.pauseQueue.run(queue, tx.now).changes > 0;
      if (changed) this.#controlled(tx, { queue, paused: true });
      return changed;
    });
  }

  resumeQueue(queue: string): Promise<boolean> {
    return this.#write((tx) => {
      const changed = this.#stmts.resumeQueue.run(queue).changes > 0;
      if (changed) this.#controlled(tx, { queue, paused: false });
      return changed;
    });
  }

  #controlled(tx: Tx, change: QueueControlChange): void {
    tx.wrote = true;
    tx.queueControls.push(change);
  }

  async lastJobId(queue: string, state: JobState): Promise<string | null> {
    const { id } = this.#stmts.lastJobId.get(queue, state) as { id: string | null };
    return id;
  }

  bulkTransition(spec: BulkBatchSpec): Promise<BulkBatchOutcome> {
    return this.#write((tx) => {
      const rows = this.#stmts.jobsInStateBetween.all(spec.queue, spec.state, spec.afterId, spec.upToId, spec.scan) as JobRow[];
      let moved = 0;
      let lastExaminedId: string | null = null;
      let examined = 0;
      for (const row of rows) {
        if (moved >= spec.take) break;
        const job = toStoredJob(row);
        examined++;
        lastExaminedId = job.id;
        if (spec.task !== undefined && job.task !== spec.task) continue;
        this.#apply(tx, job.state, bulkTransitionOf(job, tx.now, spec.action));
        moved++;
      }
      return { moved, lastExaminedId, exhausted: rows.length < spec.scan && examined === rows.length };
    });
  }

  #recoverExpired(tx: Tx, rows: JobRow[]): number {
    for (const row of rows) this.#apply(tx, "running", machine.expireLease(toStoredJob(row), tx.now));
    return rows.length;
  }

  /** Loads one job, lets the state machine decide, persists the outcome. */
  #transition(jobId: string, decide: (job: StoredJob, now: number) => machine.Transition): Promise<Job> {
    return this.#write((tx) => {
      const row = this.#stmts.jobById.get(jobId) as JobRow | undefined;
      if (row === undefined) throw jobNotFound(jobId);
      const before = toStoredJob(row);
      const t = decide(before, tx.now);
      this.#apply(tx, before.state, t);
      return publicJob(t.job);
    });
  }

  #apply(tx: Tx, fromState: JobState, t: machine.Transition): void {
    tx.wrote = true;
    const j = t.job;
    this.#stmts.updateJob.run(
      j.state,
      j.attempts,
      j.scheduleTime,
      j.updateTime,
      j.finishTime,
      j.workerId,
      j.leaseExpireTime,
      j.leaseDurationMs,
      tokenHashBlob(j.leaseTokenHash),
      j.deliveries,
      j.lastError,
      j.resultJson,
      j.heartbeatEventTime,
      j.id,
    );
    if (fromState !== t.job.state) {
      this.#adjustCount(tx, t.job.queue, fromState, -1);
      this.#adjustCount(tx, t.job.queue, t.job.state, 1);
    }
    this.#recordEvents(tx, t.events);
    if (t.unrecorded !== undefined) for (const e of t.unrecorded) tx.unrecorded.push(e);
  }

  #adjustCount(tx: Tx, queue: string, state: JobState, delta: number): void {
    const key = `${queue}\0${state}`;
    tx.counts.set(key, (tx.counts.get(key) ?? 0) + delta);
  }

  /** Writes the summed count changes of a transaction's operations. */
  #writeCounts(deltas: CountDeltas): void {
    for (const [key, delta] of deltas) {
      if (delta === 0) continue;
      const split = key.indexOf("\0");
      this.#stmts.adjustCount.run(key.slice(0, split), key.slice(split + 1), delta);
    }
  }

  /** Events get their sequence now; their rows are written with the whole transaction's (see #commitBatch). */
  #recordEvents(tx: Tx, drafts: EventDraft[]): void {
    for (const draft of drafts) tx.events.push({ sequence: this.#nextSequence++, ...draft });
  }

  /** Inserts events, many rows per statement. */
  #writeEvents(events: JobEvent[]): void {
    let i = 0;
    while (i < events.length) {
      // The largest prepared size that fits: a handful of statements serve every count.
      const rows = EVENT_INSERT_SIZES.find((size) => size <= events.length - i)!;
      const params: unknown[] = [];
      for (const e of events.slice(i, i + rows)) {
        params.push(e.sequence, e.jobId, e.queue, e.kind, e.fromState, e.toState, e.eventTime, e.workerId, e.attempt, e.message);
      }
      this.#insertEvents(rows).run(params);
      i += rows;
    }
  }

  #insertEvents(rows: number): Database.Statement {
    let stmt = this.#insertEventsCache.get(rows);
    if (stmt === undefined) {
      stmt = this.db.prepare(insertEventsSql(rows));
      this.#insertEventsCache.set(rows, stmt);
    }
    return stmt;
  }

  // ------------------------------------------------------ group commit core

  #write<T>(op: (tx: Tx) => T): Promise<T> {
    if (this.#closed) return Promise.reject(new QueueError("STORE_UNAVAILABLE", "the store is closed"));
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ op, resolve, reject } as Pending);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    while (this.#queue.length > 0) {
      this.#commitBatch(this.#queue.splice(0, this.#maxBatch));
    }
  }

  /**
   * One transaction for a batch of operations. First optimistically: each
   * operation runs without a savepoint, because a refusal is thrown before
   * the operation writes anything (Tx.wrote is still false), so it needs no
   * rollback. If an operation fails after writing (a bug, or an error that
   * SQLite did not treat as fatal), the transaction is rolled back and the
   * batch replayed with a savepoint around each operation, so that the
   * failure rolls back alone. Nothing is answered or announced before the
   * COMMIT, so the first attempt leaves no trace.
   */
  #commitBatch(batch: Pending[]): void {
    if (this.#runBatch(batch, false) === "replay") this.#runBatch(batch, true);
  }

  #runBatch(batch: Pending[], guarded: boolean): "replay" | undefined {
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    const committed: JobEvent[] = [];
    const unrecorded: EventDraft[] = [];
    const controls: QueueControlChange[] = [];
    const counts: CountDeltas = new Map();
    try {
      this.db.exec("BEGIN IMMEDIATE");
      this.#nextSequence = (this.#stmts.lastSequence.get() as { seq: number }).seq + 1;
    } catch (err) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      for (const p of batch) p.reject(storeError(err));
      this.#reportWrite(writeFailureOf(err) ?? otherWriteFailure(err));
      return undefined;
    }
    let fatal: unknown;
    // The first failure of the disk seen in this transaction, and whether an
    // operation that stays in it wrote a row (so its COMMIT really writes).
    let failure: WriteOutcome | undefined;
    let wrote = false;
    for (const p of batch) {
      if (fatal !== undefined) {
        outcomes.push({ ok: false, error: fatal });
        continue;
      }
      const tx: Tx = {
        now: this.#clock.now(),
        events: [],
        unrecorded: [],
        pending: committed,
        counts: new Map(),
        queueControls: [],
        wrote: false,
      };
      const firstSequence = this.#nextSequence;
      if (guarded) {
        try {
          this.#savepoint.run();
        } catch (err) {
          failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
          fatal = storeError(err);
          outcomes.push({ ok: false, error: fatal });
          continue;
        }
      }
      try {
        const value = p.op(tx);
        if (guarded) this.#release.run();
        outcomes.push({ ok: true, value });
        for (const e of tx.events) committed.push(e);
        for (const e of tx.unrecorded) unrecorded.push(e);
        for (const c of tx.queueControls) controls.push(c);
        for (const [key, delta] of tx.counts) counts.set(key, (counts.get(key) ?? 0) + delta);
        if (tx.wrote) wrote = true;
      } catch (err) {
        this.#nextSequence = firstSequence;
        failure ??= writeFailureOf(err);
        if (!this.db.inTransaction) {
          // SQLite rolled the whole transaction back (disk full, I/O error):
          // nothing of this batch can commit.
          failure ??= otherWriteFailure(err);
          fatal = storeError(err);
          outcomes.push({ ok: false, error: fatal });
        } else if (guarded) {
          this.#rollbackTo.run();
          this.#release.run();
          outcomes.push({ ok: false, error: storeError(err) });
        } else if (tx.wrote) {
          this.db.exec("ROLLBACK");
          return "replay";
        } else {
          outcomes.push({ ok: false, error: storeError(err) });
        }
      }
    }
    if (fatal === undefined) {
      try {
        this.#writeEvents(committed);
        this.#writeCounts(counts);
        this.db.exec("COMMIT");
      } catch (err) {
        failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
        fatal = storeError(err);
      }
    }
    if (fatal !== undefined) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      for (const p of batch) p.reject(fatal);
      this.#reportWrite(failure ?? otherWriteFailure(fatal));
      return undefined;
    }
    this.#whenDurable((syncError) => {
      if (syncError !== undefined) {
        // Committed, but not known to be on disk: answer as for a failed COMMIT.
        for (const p of batch) p.reject(syncError);
        this.#reportWrite(writeFailureOf(syncError) ?? otherWriteFailure(syncError));
        return;
      }
      batch.forEach((p, i) => {
        const o = outcomes[i]!;
        if (o.ok) p.resolve(o.value);
        else p.reject(o.error);
      });
      if (failure !== undefined) this.#reportWrite(failure);
      else if (wrote || committed.length > 0) this.#reportWrite({ ok: true });
      if (committed.length > 0 || unrecorded.length > 0 || controls.length > 0) {
        for (const listener of this.#listeners) {
          try {
            listener({ events: committed, unrecorded, queueControls: controls });
          } catch {
            // A listener's failure must not undo or block the commit it observes.
          }
        }
      }
    });
    return undefined;
  }

  #reportWrite(outcome: WriteOutcome): void {
    this.#lastWrite = { outcome, at: this.#monotonicNow() };
    for (const listener of this.#writeListeners) {
      try {
        listener(outcome);
      } catch {
        // Readiness and metrics observe writes; they must not break them.
      }
    }
  }

  /** WAL fsyncs started since the store opened: with group commit, far fewer than the writes answered. */
  get walSyncs(): number {
    return this.#walSyncs;
  }

  /** Runs `settle` once everything committed so far is on disk (at once without fsync). */
  #whenDurable(settle: (error?: unknown) => void): void {
    if (this.durability === "none") {
      settle();
      return;
    }
    this.#awaitingSync.push(settle);
    if (!this.#syncing) this.#startSync();
  }

  /** One fsync of the WAL for every batch committed before it starts. */
  #startSync(): void {
    const settles = this.#awaitingSync.splice(0);
    this.#syncing = true;
    let fd: number;
    try {
      fd = this.#walDescriptor();
    } catch (err) {
      this.#finishSync(settles, err);
      return;
    }
    this.#walSyncs++;
    this.#synced = new Promise((resolve) => {
      fsync(fd, (err) => {
        this.#finishSync(settles, err ?? undefined);
        resolve();
      });
    });
  }

  #finishSync(settles: Array<(error?: unknown) => void>, err: unknown): void {
    this.#syncing = false;
    const error = err === undefined || err === null ? undefined : syncFailure(err);
    for (const settle of settles) settle(error);
    if (this.#awaitingSync.length > 0) this.#startSync();
  }

  /**
   * The WAL's descriptor, reopened if the file was replaced (SQLite deletes
   * the WAL when the last connection to the database closes, and a new one
   * is created by the next writer).
   */
  #walDescriptor(): number {
    if (this.#walFd !== undefined) {
      let current: number | undefined;
      try {
        current = statSync(this.#walPath).ino;
      } catch {
        current = undefined;
      }
      if (current === fstatSync(this.#walFd).ino) return this.#walFd;
      closeSync(this.#walFd);
      this.#walFd = undefined;
    }
    this.#walFd = openSync(this.#walPath, "r+");
    return this.#walFd;
  }

  // ----------------------------------------------------------------- reads

  async getJob(jobId: string): Promise<Job | undefined> {
    const row = this.#stmts.jobById.get(jobId) as JobRow | undefined;
    return row === undefined ? undefined : publicJob(toStoredJob(row));
  }

  async listJobs(spec: ListJobsSpec): Promise<Job[]> {
    const states = spec.states ?? [];
    const shape = { queue: spec.queue !== undefined, states: states.length, before: spec.beforeId !== undefined };
    const key = JSON.stringify(shape);
    let stmt = this.#listCache.get(key);
    if (stmt === undefined) {
      stmt = this.db.prepare(listJobsSql(shape)).raw(true);
      this.#listCache.set(key, stmt);
    }
    const params: Record<string, unknown> = { limit: spec.limit };
    if (spec.queue !== undefined) params.queue = spec.queue;
    if (spec.beforeId !== undefined) params.before = spec.beforeId;
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
    return this.db.transaction(() => {
      const { oldest } = this.#stmts.eventBounds.get() as { oldest: number };
      const { seq } = this.#stmts.lastSequence.get() as { seq: number };
      const pruned = (this.#stmts.prunedThrough.get() as { seq: number }).seq;
      return { oldest: oldest === 0 ? 0 : Math.max(oldest, pruned + 1), latest: seq };
    })();
  }

  async queueCounts(): Promise<QueueCounts[]> {
    const now = this.#clock.now();
    const byQueue = new Map<string, QueueCounts>();
    for (const row of this.#stmts.counts.all() as Array<{ queue: string; state: JobState; count: number }>) {
      let entry = byQueue.get(row.queue);
      if (entry === undefined) {
        entry = { queue: row.queue, counts: zeroCounts(), oldestPendingSince: null, paused: false };
        byQueue.set(row.queue, entry);
      }
      entry.counts[row.state] = row.count;
    }
    // A paused queue is listed even while it has no jobs (api.md section B).
    let unlisted = false;
    for (const { queue } of this.#stmts.pausedQueues.all() as Array<{ queue: string }>) {
      const entry = byQueue.get(queue);
      if (entry !== undefined) entry.paused = true;
      else {
        byQueue.set(queue, { queue, counts: zeroCounts(), oldestPendingSince: null, paused: true });
        unlisted = true;
      }
    }
    for (const entry of byQueue.values()) {
      if (entry.counts.queued + entry.counts.retry === 0) continue;
      const { t } = this.#stmts.oldestPendingSince.get(entry.queue, now) as { t: number | null };
      entry.oldestPendingSince = t;
    }
    const queues = [...byQueue.values()];
    return unlisted ? queues.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0)) : queues;
  }

  async nextScheduledTime(queue: string): Promise<number | null> {
    const { t } = this.#stmts.nextScheduledTime.get(queue, this.#clock.now()) as { t: number | null };
    return t;
  }

  // ------------------------------------------------------------- lifecycle

  onCommitted(listener: CommitListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  onWriteOutcome(listener: WriteOutcomeListener): () => void {
    this.#writeListeners.add(listener);
    return () => this.#writeListeners.delete(listener);
  }

  async checkWritable(): Promise<void> {
    if (this.#closed || !this.db.open) throw new QueueError("STORE_UNAVAILABLE", "the store is closed");
    const last = this.#lastWrite;
    if (last === undefined || this.#monotonicNow() - last.at >= this.#writeProbeIntervalMs) {
      // No recent evidence: one small durable write, shared by every caller meanwhile.
      this.#probe ??= this.#write((tx) => {
        tx.wrote = true;
        this.#stmts.touchWriteProbe.run(tx.now);
      }).finally(() => (this.#probe = undefined));
      await this.#probe;
      return;
    }
    if (!last.outcome.ok) {
      const ago = ((this.#monotonicNow() - last.at) / 1000).toFixed(1);
      throw new QueueError(
        "STORE_UNAVAILABLE",
        `the database cannot take writes now (${last.outcome.cause}): the latest write failed ${ago} s ago with ${last.outcome.message}`,
        { cause: last.outcome.cause },
      );
    }
  }

  /** Commits what is queued, then closes the database (checkpointing the WAL). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#flush();
    // Answer every commit only once it is on disk, then stop.
    while (this.#syncing || this.#awaitingSync.length > 0) {
      await this.#synced;
      if (!this.#syncing && this.#awaitingSync.length > 0) this.#startSync();
    }
    this.#listeners.clear();
    if (this.#walFd !== undefined) {
      fsyncSync(this.#walFd);
      closeSync(this.#walFd);
      this.#walFd = undefined;
    }
    this.db.close();
    this.#lock?.release();
  }
}

function syncFailure(err: unknown): QueueError {
  const code = (err as NodeJS.ErrnoException).code ?? "unknown";
  const cause: WriteFailureCause = code === "ENOSPC" || code === "EDQUOT" ? "disk_full" : code === "EROFS" ? "readonly" : "io_error";
  return new QueueError("STORE_UNAVAILABLE", `the database cannot take writes now (fsync of the WAL failed: ${code})`, { code, cause });
}

function storeError(err: unknown): unknown {
  if (err instanceof Database.SqliteError && UNAVAILABLE_CODES.test(err.code)) {
    return new QueueError("STORE_UNAVAILABLE", `the database cannot take writes now (${err.code})`, {
      code: err.code,
      cause: writeFailureCause(err.code),
    });
  }
  return err;
}

function newStoredJob(spec: NewJob, requestHash: string | null, now: number): StoredJob {
  return {
    id: newJobId(),
    queue: spec.queue,
    task: spec.task,
    payloadJson: spec.payloadJson,
    priority: spec.priority,
    state: "queued",
    attempts: 0,
    maxAttempts: spec.maxAttempts,
    retryBaseDelayMs: spec.retryBaseDelayMs,
    scheduleTime: scheduleTimeOf(spec, now),
    createTime: now,
    updateTime: now,
    finishTime: null,
    workerId: null,
    leaseExpireTime: null,
    deliveries: 0,
    lastError: null,
    resultJson: null,
    leaseTokenHash: null,
    leaseDurationMs: null,
    idempotencyKey: spec.idempotencyKey,
    requestHash,
    heartbeatEventTime: null,
  };
}

/** A transaction lost to something that is not one of the disk's known failures. */
function otherWriteFailure(err: unknown): WriteOutcome {
  if (err instanceof QueueError && err.metadata.cause !== undefined) {
    return { ok: false, cause: err.metadata.cause as WriteFailureCause, message: err.message };
  }
  return { ok: false, cause: "other", message: err instanceof Error ? err.message : String(err) };
}

function zeroCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

/** A job row as its columns, in JOB_COLUMN_NAMES order. */
type JobRow = unknown[];

function toStoredJob(r: JobRow): StoredJob {
  return {
    id: r[0] as string,
    queue: r[1] as string,
    task: r[2] as string,
    payloadJson: r[3] as string,
    priority: r[4] as number,
    state: r[5] as JobState,
    attempts: r[6] as number,
    maxAttempts: r[7] as number,
    retryBaseDelayMs: r[8] as number,
    scheduleTime: r[9] as number,
    createTime: r[10] as number,
    updateTime: r[11] as number,
    finishTime: r[12] as number | null,
    workerId: r[13] as string | null,
    leaseExpireTime: r[14] as number | null,
    leaseDurationMs: r[15] as number | null,
    leaseTokenHash: r[16] as Uint8Array | null,
    deliveries: r[17] as number,
    lastError: r[18] as string | null,
    resultJson: r[19] as string | null,
    idempotencyKey: r[20] as string | null,
    requestHash: r[21] as string | null,
    heartbeatEventTime: r[22] as number | null,
  };
}

/** The values of a job in JOB_COLUMN_NAMES order, for insertJob (also used by the litequeue import). */
export function jobRow(j: StoredJob): JobRow {
  return [
    j.id,
    j.queue,
    j.task,
    j.payloadJson,
    j.priority,
    j.state,
    j.attempts,
    j.maxAttempts,
    j.retryBaseDelayMs,
    j.scheduleTime,
    j.createTime,
    j.updateTime,
    j.finishTime,
    j.workerId,
    j.leaseExpireTime,
    j.leaseDurationMs,
    tokenHashBlob(j.leaseTokenHash),
    j.deliveries,
    j.lastError,
    j.resultJson,
    j.idempotencyKey,
    j.requestHash,
    j.heartbeatEventTime,
  ];
}

function tokenHashBlob(hash: Uint8Array | null): Buffer | null {
  return hash === null ? null : Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength);
}

function toEvent(r: Row): JobEvent {
  return {
    sequence: r.sequence as number,
    jobId: r.job_id as string,
    queue: r.queue as string,
    kind: r.kind as JobEvent["kind"],
    fromState: r.from_state as JobState | null,
    toState: r.to_state as JobState,
    eventTime: r.event_time as number,
    workerId: r.worker_id as string | null,
    attempt: r.attempt as number,
    message: r.message as string | null,
  };
}
