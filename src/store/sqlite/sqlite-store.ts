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
 */
import Database from "better-sqlite3";
import type { Clock } from "../../domain/clock.js";
import { jobNotFound, QueueError } from "../../domain/errors.js";
import type { EventDraft, Job, JobEvent, JobState, StoredJob } from "../../domain/job.js";
import { JOB_STATES, publicJob } from "../../domain/job.js";
import { newJobId } from "../../domain/ids.js";
import { newLeaseToken } from "../../domain/lease-token.js";
import * as machine from "../../domain/state-machine.js";
import { scheduleTimeOf, submitFingerprint, type NewJob } from "../../domain/submission.js";
import type {
  ClaimedLease,
  ClaimRequestSpec,
  CommitListener,
  ListEventsSpec,
  ListJobsSpec,
  QueueCounts,
  Store,
  SubmitOutcome,
  WriteFailureCause,
  WriteOutcome,
  WriteOutcomeListener,
} from "../store.js";
import { MIGRATIONS } from "./migrations.js";
import { listJobsSql, SQL } from "./sql.js";

export interface SqliteStoreOptions {
  /** Database file, or ":memory:". */
  path: string;
  clock: Clock;
  /** SQLite synchronous mode. Default "full": every commit is fsynced. */
  synchronous?: "full" | "normal";
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

/** What an operation sees: the time of its transaction and where to record events. */
interface Tx {
  now: number;
  events: JobEvent[];
}

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

/** Applies pending migrations; returns the versions applied. */
export function migrate(db: Database.Database): number[] {
  const current = db.pragma("user_version", { simple: true }) as number;
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
  readonly #savepoint: Database.Statement;
  readonly #release: Database.Statement;
  readonly #rollbackTo: Database.Statement;

  constructor(options: SqliteStoreOptions) {
    this.#clock = options.clock;
    this.#maxBatch = options.maxBatch ?? 256;
    this.#maxRecovered = options.maxRecoveredPerSweep ?? 500;
    this.#writeProbeIntervalMs = options.writeProbeIntervalMs ?? 1000;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
    this.db = new Database(options.path, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      this.db.pragma("journal_mode = WAL");
      this.db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
      this.db.pragma("foreign_keys = ON");
      migrate(this.db);
      const stmts = {} as Record<keyof typeof SQL, Database.Statement>;
      for (const [name, sql] of Object.entries(SQL)) stmts[name as keyof typeof SQL] = this.db.prepare(sql);
      this.#stmts = stmts;
      this.#savepoint = this.db.prepare("SAVEPOINT op");
      this.#release = this.db.prepare("RELEASE op");
      this.#rollbackTo = this.db.prepare("ROLLBACK TO op");
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  // ---------------------------------------------------------------- writes

  submit(jobs: NewJob[]): Promise<SubmitOutcome[]> {
    return this.#write((tx) => jobs.map((job) => this.#submitOne(tx, job)));
  }

  #submitOne(tx: Tx, spec: NewJob): SubmitOutcome {
    const requestHash = spec.idempotencyKey === null ? null : submitFingerprint(spec);
    if (spec.idempotencyKey !== null) {
      const row = this.#stmts.jobByIdempotencyKey.get(spec.queue, spec.idempotencyKey) as Row | undefined;
      if (row !== undefined) {
        const existing = toStoredJob(row);
        if (existing.requestHash !== requestHash) {
          throw new QueueError(
            "IDEMPOTENCY_MISMATCH",
            `idempotency_key was already used in queue "${spec.queue}" for a different request (job ${existing.id})`,
            { jobId: existing.id, queue: spec.queue },
          );
        }
        return { job: publicJob(existing), deduplicated: true };
      }
    }
    const job: StoredJob = {
      id: newJobId(),
      queue: spec.queue,
      task: spec.task,
      payloadJson: spec.payloadJson,
      priority: spec.priority,
      state: "queued",
      attempts: 0,
      maxAttempts: spec.maxAttempts,
      retryBaseDelayMs: spec.retryBaseDelayMs,
      scheduleTime: scheduleTimeOf(spec, tx.now),
      createTime: tx.now,
      updateTime: tx.now,
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
    };
    this.#stmts.insertJob.run(toRow(job));
    this.#adjustCount(job.queue, job.state, 1);
    this.#recordEvents(tx, machine.submitted(job).events);
    return { job: publicJob(job), deduplicated: false };
  }

  claim(spec: ClaimRequestSpec): Promise<ClaimedLease[]> {
    return this.#write((tx) => {
      this.#recoverExpired(tx, this.#stmts.expiredLeasesOfQueue.all(tx.now, spec.queue, this.#maxRecovered) as Row[]);
      // Walking jobs_claim_order also passes jobs scheduled for later; skip it
      // when nothing is eligible (an O(log n) look at jobs_pending_since).
      const { t } = this.#stmts.oldestPendingSince.get(spec.queue, tx.now) as { t: number | null };
      if (t === null) return [];
      const rows = this.#stmts.claimableJobs.all(spec.queue, tx.now, spec.maxJobs) as Row[];
      return rows.map((row) => {
        const { token, hash } = newLeaseToken();
        const t = machine.claim(toStoredJob(row), tx.now, {
          workerId: spec.workerId,
          leaseDurationMs: spec.leaseDurationMs,
          tokenHash: hash,
        });
        this.#apply(tx, row.state as JobState, t);
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
      this.#recoverExpired(tx, this.#stmts.expiredLeases.all(tx.now, this.#maxRecovered) as Row[]),
    );
  }

  #recoverExpired(tx: Tx, rows: Row[]): number {
    for (const row of rows) this.#apply(tx, "running", machine.expireLease(toStoredJob(row), tx.now));
    return rows.length;
  }

  /** Loads one job, lets the state machine decide, persists the outcome. */
  #transition(jobId: string, decide: (job: StoredJob, now: number) => machine.Transition): Promise<Job> {
    return this.#write((tx) => {
      const row = this.#stmts.jobById.get(jobId) as Row | undefined;
      if (row === undefined) throw jobNotFound(jobId);
      const before = toStoredJob(row);
      const t = decide(before, tx.now);
      this.#apply(tx, before.state, t);
      return publicJob(t.job);
    });
  }

  #apply(tx: Tx, fromState: JobState, t: machine.Transition): void {
    this.#stmts.updateJob.run(toRow(t.job));
    if (fromState !== t.job.state) {
      this.#adjustCount(t.job.queue, fromState, -1);
      this.#adjustCount(t.job.queue, t.job.state, 1);
    }
    this.#recordEvents(tx, t.events);
  }

  #adjustCount(queue: string, state: JobState, delta: number): void {
    this.#stmts.adjustCount.run(queue, state, delta);
  }

  #recordEvents(tx: Tx, drafts: EventDraft[]): void {
    for (const draft of drafts) {
      const { sequence } = this.#stmts.insertEvent.get(draft) as { sequence: number };
      tx.events.push({ sequence, ...draft });
    }
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

  #commitBatch(batch: Pending[]): void {
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    const committed: JobEvent[] = [];
    try {
      this.db.exec("BEGIN IMMEDIATE");
    } catch (err) {
      for (const p of batch) p.reject(storeError(err));
      this.#reportWrite(writeFailureOf(err) ?? otherWriteFailure(err));
      return;
    }
    let fatal: unknown;
    // The first failure of the disk seen in this transaction, and whether an
    // operation that stays in it changed a row (so its COMMIT really writes).
    let failure: WriteOutcome | undefined;
    let wrote = false;
    for (const p of batch) {
      if (fatal !== undefined) {
        outcomes.push({ ok: false, error: fatal });
        continue;
      }
      const tx: Tx = { now: this.#clock.now(), events: [] };
      try {
        this.#savepoint.run();
      } catch (err) {
        failure ??= writeFailureOf(err) ?? otherWriteFailure(err);
        fatal = storeError(err);
        outcomes.push({ ok: false, error: fatal });
        continue;
      }
      const changesBefore = wrote ? 0 : this.#totalChanges();
      try {
        const value = p.op(tx);
        this.#release.run();
        outcomes.push({ ok: true, value });
        committed.push(...tx.events);
        if (!wrote && this.#totalChanges() > changesBefore) wrote = true;
      } catch (err) {
        failure ??= writeFailureOf(err);
        if (this.db.inTransaction) {
          this.#rollbackTo.run();
          this.#release.run();
          outcomes.push({ ok: false, error: storeError(err) });
        } else {
          // SQLite rolled the whole transaction back (disk full, I/O error):
          // nothing of this batch can commit.
          failure ??= otherWriteFailure(err);
          fatal = storeError(err);
          outcomes.push({ ok: false, error: fatal });
        }
      }
    }
    if (fatal === undefined) {
      try {
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
      return;
    }
    batch.forEach((p, i) => {
      const o = outcomes[i]!;
      if (o.ok) p.resolve(o.value);
      else p.reject(o.error);
    });
    if (failure !== undefined) this.#reportWrite(failure);
    else if (wrote) this.#reportWrite({ ok: true });
    if (committed.length > 0) {
      for (const listener of this.#listeners) {
        try {
          listener({ events: committed });
        } catch {
          // A listener's failure must not undo or block the commit it observes.
        }
      }
    }
  }

  #totalChanges(): number {
    return (this.#stmts.totalChanges.get() as { n: number }).n;
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

  // ----------------------------------------------------------------- reads

  async getJob(jobId: string): Promise<Job | undefined> {
    const row = this.#stmts.jobById.get(jobId) as Row | undefined;
    return row === undefined ? undefined : publicJob(toStoredJob(row));
  }

  async listJobs(spec: ListJobsSpec): Promise<Job[]> {
    const states = spec.states ?? [];
    const shape = { queue: spec.queue !== undefined, states: states.length, before: spec.beforeId !== undefined };
    const key = JSON.stringify(shape);
    let stmt = this.#listCache.get(key);
    if (stmt === undefined) {
      stmt = this.db.prepare(listJobsSql(shape));
      this.#listCache.set(key, stmt);
    }
    const params: Record<string, unknown> = { limit: spec.limit };
    if (spec.queue !== undefined) params.queue = spec.queue;
    if (spec.beforeId !== undefined) params.before = spec.beforeId;
    states.forEach((s, i) => (params[`state${i}`] = s));
    return (stmt.all(params) as Row[]).map((r) => publicJob(toStoredJob(r)));
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
    const { oldest } = this.#stmts.eventBounds.get() as { oldest: number };
    const { seq } = this.#stmts.lastSequence.get() as { seq: number };
    return { oldest, latest: seq };
  }

  async queueCounts(): Promise<QueueCounts[]> {
    const now = this.#clock.now();
    const byQueue = new Map<string, QueueCounts>();
    for (const row of this.#stmts.counts.all() as Array<{ queue: string; state: JobState; count: number }>) {
      let entry = byQueue.get(row.queue);
      if (entry === undefined) {
        entry = { queue: row.queue, counts: zeroCounts(), oldestPendingSince: null };
        byQueue.set(row.queue, entry);
      }
      entry.counts[row.state] = row.count;
    }
    for (const entry of byQueue.values()) {
      if (entry.counts.queued + entry.counts.retry === 0) continue;
      const { t } = this.#stmts.oldestPendingSince.get(entry.queue, now) as { t: number | null };
      entry.oldestPendingSince = t;
    }
    return [...byQueue.values()];
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
    this.#listeners.clear();
    this.db.close();
  }
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

function toStoredJob(r: Row): StoredJob {
  return {
    id: r.id as string,
    queue: r.queue as string,
    task: r.task as string,
    payloadJson: r.payload as string,
    priority: r.priority as number,
    state: r.state as JobState,
    attempts: r.attempts as number,
    maxAttempts: r.max_attempts as number,
    retryBaseDelayMs: r.retry_base_delay_ms as number,
    scheduleTime: r.schedule_time as number,
    createTime: r.create_time as number,
    updateTime: r.update_time as number,
    finishTime: r.finish_time as number | null,
    workerId: r.worker_id as string | null,
    leaseExpireTime: r.lease_expire_time as number | null,
    leaseDurationMs: r.lease_duration_ms as number | null,
    leaseTokenHash: r.lease_token_hash as Uint8Array | null,
    deliveries: r.deliveries as number,
    lastError: r.last_error as string | null,
    resultJson: r.result as string | null,
    idempotencyKey: r.idempotency_key as string | null,
    requestHash: r.request_hash as string | null,
  };
}

function toRow(j: StoredJob): Row {
  return {
    id: j.id,
    queue: j.queue,
    task: j.task,
    payload: j.payloadJson,
    priority: j.priority,
    state: j.state,
    attempts: j.attempts,
    max_attempts: j.maxAttempts,
    retry_base_delay_ms: j.retryBaseDelayMs,
    schedule_time: j.scheduleTime,
    create_time: j.createTime,
    update_time: j.updateTime,
    finish_time: j.finishTime,
    worker_id: j.workerId,
    lease_expire_time: j.leaseExpireTime,
    lease_duration_ms: j.leaseDurationMs,
    lease_token_hash: j.leaseTokenHash === null ? null : Buffer.from(j.leaseTokenHash),
    deliveries: j.deliveries,
    last_error: j.lastError,
    result: j.resultJson,
    idempotency_key: j.idempotencyKey,
    request_hash: j.requestHash,
  };
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
