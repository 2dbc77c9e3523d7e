/**
 * What every engine's Store shares above its transactions: each write is
 * one of the engine-neutral operations (store/operations/) handed to the
 * engine's own transaction runner (`runWrite`: SQLite's group commit,
 * PostgreSQL's group commit on a pool); the listeners of commits and of
 * write outcomes; and readiness (checkWritable), which answers from the
 * latest write when it is recent and otherwise makes one small probe write.
 *
 * An engine extends this with its reads, its announcements (it calls
 * `announce` in the order Store promises) and its lifecycle.
 */
import type { Clock } from "../../domain/clock.js";
import { QueueError } from "../../domain/errors.js";
import type { Job, JobState } from "../../domain/job.js";
import type { QueueConfig, QueueConfigUpdate } from "../../domain/queue-limits.js";
import type { ScheduleSpec, StoredSchedule } from "../../domain/schedule.js";
import type { NewJob } from "../../domain/submission.js";
import { purgeQueue, redriveAll, type BulkOptions } from "./bulk-transitions.js";
import type { WriteArgs, WriteName, WriteResult } from "./write-calls.js";
import type {
  ActivityPruneOutcome,
  ActivityPruneSpec,
  BulkBatchOutcome,
  BulkBatchSpec,
  ClaimOutcome,
  ClaimRequestSpec,
  CommitListener,
  CommittedChange,
  FiredRun,
  PruneOutcome,
  PruneSpec,
  SubmitOutcome,
  WriteOutcome,
  WriteOutcomeListener,
} from "../store.js";

export interface OperationStoreOptions {
  clock: Clock;
  /** Most expired leases recovered by one sweep transaction (and by one claim, of its queue). Default 500. */
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

export abstract class OperationStore {
  readonly clock: Clock;
  readonly #maxRecovered: number;
  readonly #listeners = new Set<CommitListener>();
  readonly #writeListeners = new Set<WriteOutcomeListener>();
  readonly #writeProbeIntervalMs: number;
  readonly #monotonicNow: () => number;
  /** The latest reported write outcome and when (monotonic ms) it happened. */
  #lastWrite: { outcome: WriteOutcome; at: number } | undefined;
  /** The probe write in flight; concurrent checkWritable calls share it. */
  #probe: Promise<void> | undefined;

  constructor(options: OperationStoreOptions) {
    this.clock = options.clock;
    this.#maxRecovered = options.maxRecoveredPerSweep ?? 500;
    this.#writeProbeIntervalMs = options.writeProbeIntervalMs ?? 1000;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
  }

  /**
   * Runs one write (store/writing/write-calls.ts: its name and arguments) in a
   * transaction of the engine's; settles once it committed (or was refused).
   */
  protected abstract runWrite<N extends WriteName>(name: N, args: WriteArgs<N>): Promise<WriteResult<N>>;

  /** False once the store is closed (or its database is): checkWritable refuses then. */
  protected abstract get isOpen(): boolean;

  // ---------------------------------------------------------------- writes

  submit(jobs: NewJob[]): Promise<SubmitOutcome[]> {
    return this.runWrite("submit", [jobs]);
  }

  claimOutcome(spec: ClaimRequestSpec): Promise<ClaimOutcome> {
    return this.runWrite("claim", [spec, this.#maxRecovered]);
  }

  heartbeat(jobId: string, leaseToken: string, leaseDurationMs?: number, progressJson?: string): Promise<Job> {
    return this.runWrite("heartbeat", [jobId, leaseToken, leaseDurationMs, progressJson]);
  }

  complete(jobId: string, leaseToken: string, resultJson: string | null): Promise<Job> {
    return this.runWrite("complete", [jobId, leaseToken, resultJson]);
  }

  fail(jobId: string, leaseToken: string, failure: { error: string; permanent: boolean; retryDelayMs?: number }): Promise<Job> {
    return this.runWrite("fail", [jobId, leaseToken, failure]);
  }

  release(jobId: string, leaseToken: string): Promise<Job> {
    return this.runWrite("release", [jobId, leaseToken]);
  }

  snooze(jobId: string, leaseToken: string, delayMs: number): Promise<Job> {
    return this.runWrite("snooze", [jobId, leaseToken, delayMs]);
  }

  redrive(jobId: string): Promise<Job> {
    return this.runWrite("redrive", [jobId]);
  }

  cancel(jobId: string, reason: string, includeRunning = false): Promise<Job> {
    return this.runWrite("cancel", [jobId, reason, includeRunning]);
  }

  recoverExpiredLeases(): Promise<number> {
    return this.runWrite("recoverExpiredLeases", [this.#maxRecovered]);
  }

  pruneJobs(spec: PruneSpec): Promise<PruneOutcome> {
    return this.runWrite("pruneJobs", [spec]);
  }

  pruneActivity(spec: ActivityPruneSpec): Promise<ActivityPruneOutcome> {
    return this.runWrite("pruneActivity", [spec]);
  }

  pauseQueue(queue: string): Promise<boolean> {
    return this.runWrite("pauseQueue", [queue]);
  }

  resumeQueue(queue: string): Promise<boolean> {
    return this.runWrite("resumeQueue", [queue]);
  }

  updateQueueConfig(queue: string, update: QueueConfigUpdate): Promise<QueueConfig> {
    return this.runWrite("updateQueueConfig", [queue, update]);
  }

  bulkTransition(spec: BulkBatchSpec): Promise<BulkBatchOutcome> {
    return this.runWrite("bulkTransition", [spec]);
  }

  abstract lastJobId(queue: string, state: JobState): Promise<string | null>;

  redriveAll(spec: { queue: string; task?: string; limit: number }, options?: BulkOptions): Promise<number> {
    return redriveAll(this, spec, options);
  }

  purgeQueue(queue: string, options?: BulkOptions): Promise<number> {
    return purgeQueue(this, queue, options);
  }

  createSchedule(spec: ScheduleSpec): Promise<StoredSchedule> {
    return this.runWrite("createSchedule", [spec]);
  }

  deleteSchedule(name: string): Promise<void> {
    return this.runWrite("deleteSchedule", [name]);
  }

  fireDueSchedules(limit: number, newTraces = false): Promise<FiredRun[]> {
    return this.runWrite("fireDueSchedules", [limit, newTraces]);
  }

  // ------------------------------------------------------------ listeners

  onCommitted(listener: CommitListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  onWriteOutcome(listener: WriteOutcomeListener): () => void {
    this.#writeListeners.add(listener);
    return () => this.#writeListeners.delete(listener);
  }

  /** Whether anyone listens to commits (an engine may skip reading what nobody would be told). */
  protected get hasCommitListeners(): boolean {
    return this.#listeners.size > 0;
  }

  protected clearCommitListeners(): void {
    this.#listeners.clear();
  }

  /** Tells every commit listener; a change with nothing in it is not announced. */
  protected announce(change: CommittedChange): void {
    if (
      change.events.length === 0 &&
      change.unrecorded.length === 0 &&
      change.queueControls.length === 0 &&
      change.schedulesChanged !== true
    ) {
      return;
    }
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch {
        // A listener's failure must not undo or block the commit it observes.
      }
    }
  }

  /** Records and tells the outcome of a write transaction (readiness and metrics follow it). */
  protected reportWrite(outcome: WriteOutcome): void {
    this.#lastWrite = { outcome, at: this.#monotonicNow() };
    for (const listener of this.#writeListeners) {
      try {
        listener(outcome);
      } catch {
        // Readiness and metrics observe writes; they must not break them.
      }
    }
  }

  // ------------------------------------------------------------ readiness

  async checkWritable(): Promise<void> {
    if (!this.isOpen) throw new QueueError("STORE_UNAVAILABLE", "the store is closed");
    const last = this.#lastWrite;
    if (last === undefined || this.#monotonicNow() - last.at >= this.#writeProbeIntervalMs) {
      // No recent evidence: one small durable write, shared by every caller meanwhile.
      this.#probe ??= this.runWrite("probeWrite", []).finally(() => (this.#probe = undefined));
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
}
