/**
 * The SQLite store's TransactionPort (store/transaction-port.ts): the SQL of
 * sql.ts behind the port's methods, on the store's one connection, inside
 * the transaction its group commit opened. Every method answers at once
 * (better-sqlite3 is synchronous), so an operation never gives the event
 * loop away in the middle of a transaction.
 *
 * Besides the port, it tells the group commit whether the current operation
 * wrote a row (`wrote`: an operation that failed after writing needs the
 * batch replayed with savepoints), and it numbers events itself: the
 * transaction holds the write lock, so the next sequence, read at BEGIN,
 * is known, and events are written with many rows per INSERT.
 */
import type Database from "better-sqlite3";
import type { DependencyResult, DependentCounts } from "../../domain/dependencies.js";
import type { EventDraft, JobEvent, JobState, StoredJob } from "../../domain/job.js";
import { dependentCounts, type DependentRow } from "../rows/dependency-rows.js";
import type { GroupLimit, QueueConfig, WindowGrants } from "../../domain/queue-limits.js";
import type { PrunableState } from "../../domain/retention.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { activityValues } from "../rows/activity-columns.js";
import type {
  ActivityDelta,
  CountDelta,
  DependencyEdge,
  DueGroup,
  GroupRead,
  GroupState,
  PrunableJob,
  ScheduleRunUpdate,
  TransactionPort,
} from "../transaction-port.js";
import { jobRow, scheduleRow, toSchedule, toStoredJob, updatedJobRow, type JobRow, type Row } from "./rows.js";
import { configFromRow, EVENT_INSERT_SIZES, insertEventsSql, type QueueConfigRow, type SqliteStatements } from "./sql.js";

export class SqlitePort implements TransactionPort {
  /** Set by the first row the current operation writes; the group commit resets it per operation. */
  wrote = false;
  /** The sequence the next event gets; set by the group commit at each BEGIN. */
  nextSequence = 1;
  readonly #db: Database.Database;
  readonly #stmts: SqliteStatements;
  readonly #insertEventsCache = new Map<number, Database.Statement>();

  constructor(db: Database.Database, stmts: SqliteStatements) {
    this.#db = db;
    this.#stmts = stmts;
  }

  findJobs(ids: readonly string[]): Array<StoredJob | undefined> {
    return ids.map((id) => {
      const row = this.#stmts.jobById.get(id) as JobRow | undefined;
      return row === undefined ? undefined : toStoredJob(row);
    });
  }

  findByIdempotencyKeys(keys: ReadonlyArray<{ queue: string; key: string }>): Array<StoredJob | undefined> {
    return keys.map(({ queue, key }) => {
      const row = this.#stmts.jobByIdempotencyKey.get(queue, key) as JobRow | undefined;
      return row === undefined ? undefined : toStoredJob(row);
    });
  }

  insertJobs(jobs: readonly StoredJob[]): void {
    this.wrote = true;
    for (const job of jobs) this.#stmts.insertJob.run(jobRow(job));
  }

  updateJobs(jobs: readonly StoredJob[]): void {
    this.wrote = true;
    for (const j of jobs) {
      this.#stmts.updateJob.run(updatedJobRow(j));
    }
  }

  insertDependencies(edges: readonly DependencyEdge[]): void {
    this.wrote = true;
    for (const e of edges) {
      this.#stmts.insertDependency.run(e.jobId, e.position, e.dependsOnId);
      this.#stmts.markHasDependents.run(e.dependsOnId);
    }
  }

  countDependencyChange(dependencyId: string, change: { completed: number; failed: number }): DependentCounts[] {
    this.wrote = true;
    const rows = this.#stmts.countDependencyChange.all({ id: dependencyId, ...change }) as DependentRow[];
    return rows.map(dependentCounts);
  }

  dependencyResults(jobIds: readonly string[], limit: number): DependencyResult[][] {
    return jobIds.map((id) => this.#stmts.dependencyResults.all(id, limit) as DependencyResult[]);
  }

  selectClaimable(queue: string, now: number, limit: number): StoredJob[] {
    // Walking jobs_claim_order also passes jobs scheduled for later; skip it
    // when nothing is eligible (an O(log n) look at jobs_pending_since).
    const { t } = this.#stmts.oldestPendingSince.get(queue, now) as { t: number | null };
    if (t === null) return [];
    return (this.#stmts.claimableJobs.all(queue, now, limit) as JobRow[]).map(toStoredJob);
  }

  nextScheduledTime(queue: string, now: number): number | null {
    return (this.#stmts.nextScheduledTime.get(queue, now) as { t: number | null }).t;
  }

  selectExpiredLeases(now: number, limit: number, queue?: string): StoredJob[] {
    const rows = queue === undefined ? this.#stmts.expiredLeases.all(now, limit) : this.#stmts.expiredLeasesOfQueue.all(now, queue, limit);
    return (rows as JobRow[]).map(toStoredJob);
  }

  selectJobsInStateBetween(queue: string, state: JobState, afterId: string, upToId: string, limit: number): StoredJob[] {
    return (this.#stmts.jobsInStateBetween.all(queue, state, afterId, upToId, limit) as JobRow[]).map(toStoredJob);
  }

  isQueuePaused(queue: string): boolean {
    return this.#stmts.queuePaused.get(queue) !== undefined;
  }

  pauseQueue(queue: string, now: number): boolean {
    const changed = this.#stmts.pauseQueue.run(queue, now).changes > 0;
    if (changed) this.wrote = true;
    return changed;
  }

  resumeQueue(queue: string): boolean {
    const changed = this.#stmts.resumeQueue.run(queue).changes > 0;
    if (changed) this.wrote = true;
    return changed;
  }

  findSchedule(name: string): StoredSchedule | undefined {
    const row = this.#stmts.scheduleByName.get(name) as Row | undefined;
    return row === undefined ? undefined : toSchedule(row);
  }

  upsertSchedule(schedule: StoredSchedule): void {
    this.wrote = true;
    this.#stmts.upsertSchedule.run(scheduleRow(schedule));
  }

  deleteSchedule(name: string): boolean {
    const deleted = this.#stmts.deleteSchedule.run(name).changes > 0;
    if (deleted) this.wrote = true;
    return deleted;
  }

  selectDueSchedules(now: number, limit: number): StoredSchedule[] {
    return (this.#stmts.dueSchedules.all(now, limit) as Row[]).map(toSchedule);
  }

  recordScheduleRuns(runs: readonly ScheduleRunUpdate[]): void {
    if (runs.length > 0) this.wrote = true;
    for (const r of runs) this.#stmts.recordScheduleRun.run(r.nextRunTime, r.lastRunTime, r.updateTime, r.name);
  }

  queueConfig(queue: string): QueueConfig | undefined {
    const row = this.#stmts.queueConfig.get(queue) as QueueConfigRow | undefined;
    return row === undefined ? undefined : configFromRow(row);
  }

  setQueueConfig(queue: string, config: QueueConfig | undefined, now: number): void {
    this.wrote = true;
    if (config === undefined) this.#stmts.deleteQueueConfig.run(queue);
    else {
      const c = config;
      this.#stmts.setQueueConfig.run(
        queue,
        c.maxRunning,
        c.rateLimit,
        c.ratePeriodMs,
        c.groupMaxRunning,
        c.groupRateLimit,
        +c.fair,
        +c.ordered,
        now,
      );
    }
  }

  countRunning(queue: string, atMost: number): number {
    return (this.#stmts.countRunning.get(queue, atMost) as { n: number }).n;
  }

  leaseGrantsSince(queue: string, after: number): WindowGrants {
    return this.#stmts.leaseGrantsSince.get(queue, after) as WindowGrants;
  }

  recordLeaseGrant(queue: string, at: number, leases: number, forgetThrough: number): void {
    this.wrote = true;
    this.#stmts.forgetLeaseGrantsThrough.run(queue, forgetThrough);
    this.#stmts.recordLeaseGrant.run(queue, at, leases);
  }

  forgetLeaseGrants(queue: string): void {
    this.wrote = true;
    this.#stmts.forgetLeaseGrants.run(queue);
  }

  selectGroupsClaimable(queue: string, groupKeys: readonly string[], now: number, perGroup: number): StoredJob[][] {
    return groupKeys.map((groupKey) => {
      const rows =
        groupKey === ""
          ? this.#stmts.ungroupedClaimableJobs.all(queue, now, perGroup)
          : this.#stmts.groupClaimableJobs.all(queue, groupKey, now, perGroup);
      return (rows as JobRow[]).map(toStoredJob);
    });
  }

  readGroups(queue: string, groupKeys: readonly string[], read: GroupRead): GroupState[] {
    return groupKeys.map((groupKey) => {
      const running =
        read.runningAtMost > 0 ? (this.#stmts.countGroupRunning.get(queue, groupKey, read.runningAtMost) as { n: number }).n : 0;
      const grants =
        read.grantsAfter !== null
          ? (this.#stmts.groupLeaseGrantsSince.get(queue, groupKey, read.grantsAfter) as WindowGrants)
          : { leases: 0, oldest: null };
      const row = read.heads ? (this.#stmts.orderedHead.get({ queue, group: groupKey }) as JobRow | undefined) : undefined;
      // One writer at a time: nothing else holds the head.
      return { groupKey, running, grants, head: row === undefined ? undefined : { job: toStoredJob(row), busy: false } };
    });
  }

  recordGroupLeaseGrants(
    queue: string,
    at: number,
    grants: ReadonlyArray<{ groupKey: string; leases: number }>,
    forgetThrough: number,
  ): void {
    this.wrote = true;
    for (const g of grants) {
      this.#stmts.forgetGroupLeaseGrantsThrough.run(queue, g.groupKey, forgetThrough);
      this.#stmts.recordGroupLeaseGrant.run(queue, g.groupKey, at, g.leases);
    }
  }

  forgetGroupLeaseGrants(queue: string): void {
    this.wrote = true;
    this.#stmts.forgetGroupLeaseGrants.run(queue);
  }

  selectDueGroups(queue: string, now: number, after: DueGroup | null, limit: number): DueGroup[] {
    return this.#stmts.dueGroups.all(queue, now, after?.servedSeq ?? -1, after?.groupKey ?? "", limit) as DueGroup[];
  }

  parkGroup(queue: string, group: DueGroup, dueTime: number | null, heldBy: GroupLimit): void {
    this.wrote = true;
    this.#stmts.parkGroup.run(dueTime, heldBy, queue, group.groupKey, group.version);
  }

  heldGroupRule(queue: string): GroupLimit | null {
    const row = this.#stmts.heldGroup.get(queue) as { limit_: GroupLimit } | undefined;
    return row?.limit_ ?? null;
  }

  settleGroup(queue: string, group: DueGroup): void {
    this.wrote = true;
    const params = { queue, group: group.groupKey, version: group.version };
    this.#stmts.settleGroup.run(params);
    this.#stmts.dropSettledGroup.run(params);
  }

  markGroupsServed(queue: string, groupKeys: readonly string[]): void {
    if (groupKeys.length === 0) return;
    this.wrote = true;
    const row = this.#stmts.takeTurns.get(groupKeys.length, queue) as { turns: number } | undefined;
    const base = (row?.turns ?? groupKeys.length) - groupKeys.length;
    groupKeys.forEach((key, i) => this.#stmts.markGroupServed.run(base + i + 1, queue, key));
  }

  nextGroupDueTime(queue: string, now: number): number | null {
    return (this.#stmts.nextGroupDueTime.get(queue, now) as { t: number | null }).t;
  }

  rebuildGroups(queue: string): void {
    this.wrote = true;
    this.#stmts.rebuildGroups.run(queue);
  }

  dropGroups(queue: string): void {
    this.wrote = true;
    this.#stmts.dropGroups.run(queue);
  }

  selectPrunable(state: PrunableState, finishedBefore: number, limit: number): PrunableJob[] {
    return this.#stmts.prunableJobs.all(state, finishedBefore, limit) as PrunableJob[];
  }

  deleteJobs(ids: readonly string[]): { events: number } {
    this.wrote = true;
    let events = 0;
    let prunedThrough = 0;
    for (const id of ids) {
      for (const { sequence } of this.#stmts.deleteEventsOfJob.all(id) as Array<{ sequence: number }>) {
        events++;
        if (sequence > prunedThrough) prunedThrough = sequence;
      }
      this.#stmts.deleteJob.run(id);
      this.#stmts.deleteDependenciesOfJob.run(id);
    }
    if (prunedThrough > 0) this.#stmts.advancePrunedThrough.run(prunedThrough);
    return { events };
  }

  touchWriteProbe(now: number): void {
    this.wrote = true;
    this.#stmts.touchWriteProbe.run(now);
  }

  addCountDeltas(deltas: readonly CountDelta[]): void {
    for (const { queue, state, delta } of deltas) this.#stmts.adjustCount.run(queue, state, delta);
  }

  addActivity(deltas: readonly ActivityDelta[]): void {
    for (const d of deltas) this.#stmts.addActivity.run(d.queue, d.minute, ...activityValues(d));
  }

  deleteActivityBefore(beforeMinute: number, limit: number): number {
    // One statement, atomic: it wrote only if it deleted something.
    const { changes } = this.#stmts.deleteActivityBefore.run(beforeMinute, limit);
    if (changes > 0) this.wrote = true;
    return changes;
  }

  /** Numbers the events from nextSequence and inserts them, many rows per statement. */
  insertEvents(drafts: readonly EventDraft[]): JobEvent[] {
    const events = drafts.map((draft) => ({ sequence: this.nextSequence++, ...draft }));
    let i = 0;
    while (i < events.length) {
      // The largest prepared size that fits: a handful of statements serve every count.
      const rows = EVENT_INSERT_SIZES.find((size) => size <= events.length - i)!;
      const params: unknown[] = [];
      for (let k = i; k < i + rows; k++) {
        const e = events[k];
        params.push(
          e.sequence,
          e.jobId,
          e.queue,
          e.kind,
          e.fromState,
          e.toState,
          e.eventTime,
          e.workerId,
          e.attempt,
          e.message,
          e.groupKey,
        );
      }
      this.#insertEvents(rows).run(params);
      i += rows;
    }
    return events;
  }

  #insertEvents(rows: number): Database.Statement {
    let stmt = this.#insertEventsCache.get(rows);
    if (stmt === undefined) {
      stmt = this.#db.prepare(insertEventsSql(rows));
      this.#insertEventsCache.set(rows, stmt);
    }
    return stmt;
  }
}
