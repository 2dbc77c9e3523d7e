/**
 * The PostgreSQL store's TransactionPort (store/transaction-port.ts): one
 * per transaction, on the pooled connection that runs it. Every method
 * answers with a promise (one round trip, one statement for many rows).
 */
import type pg from "pg";
import type { DependencyResult, DependentCounts } from "../../domain/dependencies.js";
import type { EventDraft, JobEvent, JobState, StoredJob } from "../../domain/job.js";
import { dependentCounts, type DependentRow } from "../rows/dependency-rows.js";
import type { PrunableState } from "../../domain/retention.js";
import type { GroupLimit, QueueConfig, WindowGrants } from "../../domain/queue-limits.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import type {
  ActivityDelta,
  CountDelta,
  DependencyEdge,
  DueGroup,
  GroupRead,
  GroupState,
  OrderedHead,
  PrunableJob,
  ScheduleRunUpdate,
  TransactionPort,
} from "../transaction-port.js";
import { unsequencedEventParams } from "./event-sql.js";
import { countDeltaParams } from "./job-counts.js";
import { insertJobsParams, isUuid, NIL_UUID, toStoredJob, updateJobsParams } from "./job-sql.js";
import type { PgStatements } from "./pg-statements.js";
import { prepared, preparedArrays } from "./prepared.js";
import { activityDeltaParam } from "./queue-activity-sql.js";
import { queueConfigParams } from "./queue-limit-sql.js";
import { scheduleParams, scheduleRunParams, toSchedule } from "./schedule-sql.js";

/**
 * Locks: the jobs an operation names by id (WriteOperation.jobIds) are
 * locked up front for the whole batch by `lockJobs`, in id order, so two
 * transactions that touch overlapping jobs never deadlock; findJobs then
 * answers from those rows, kept current as the transaction changes them.
 * Selections for change (claimable, expired, bulk, prunable) lock with
 * SKIP LOCKED: a concurrent transaction (of this server or another) gets
 * other rows instead of waiting. A fair queue's group rows, which the job
 * triggers write (migration 6), are locked ahead of each flush's job
 * writes in one statement, in (queue, group_key) order (`flush`): left to
 * the triggers, an INSERT and an UPDATE of one flush, or the join order
 * of one UPDATE, would lock them in an order of their own, and two
 * servers finishing jobs of the same groups would deadlock.
 *
 * Events: written without a sequence to `unsequenced_events` and numbered
 * after the commit (event-sequencer.ts), so insertEvents answers them with
 * sequence 0; the store reads the numbered events back before it answers
 * and announces (pg-store.ts).
 */
export class PgPort implements TransactionPort {
  /** Set by the first row the current operation writes; the transaction runner resets it per operation. */
  wrote = false;
  readonly #client: pg.ClientBase;
  readonly #sql: PgStatements;
  /** Rows this transaction holds locked (or created), as they are now; undefined: locked and known not to exist. */
  readonly #held = new Map<string, StoredJob | undefined>();
  /**
   * Job rows written by the operations but not sent yet (write-behind): new
   * jobs in order, and changed jobs by id, the latest version of each. They
   * go in one INSERT and one UPDATE (`flush`) before the next statement that
   * reads jobs, and before the commit, so that a batch of 200 Completes costs
   * one UPDATE, not 200 round trips; reads by id are answered from #held.
   */
  #unsentInserts: StoredJob[] = [];
  readonly #unsentUpdates = new Map<string, StoredJob>();
  /** For each job in #unsentUpdates: its row as the database has it, before the UPDATE (what the triggers compare with). */
  readonly #unsentFrom = new Map<string, StoredJob | undefined>();

  constructor(client: pg.ClientBase, statements: PgStatements) {
    this.#client = client;
    this.#sql = statements;
  }

  /** Sends the job rows written so far (see #unsentInserts). The transaction runner calls it after each guarded operation and before the commit. */
  async flush(): Promise<void> {
    // Sent at once (the connection pipelines), in this order: the group
    // rows the triggers will write, locked in one order; the INSERT; the UPDATE.
    const sent: Array<Promise<unknown>> = [];
    const groups = this.#groupsWritten();
    if (groups.length > 0) {
      sent.push(this.#client.query(prepared(this.#sql.limits.lockGroups, [groups.map((g) => g[0]), groups.map((g) => g[1])])));
    }
    if (this.#unsentInserts.length > 0) {
      const jobs = this.#unsentInserts;
      this.#unsentInserts = [];
      sent.push(this.#client.query(prepared(this.#sql.jobs.insertJobs, insertJobsParams(jobs))));
    }
    if (this.#unsentUpdates.size > 0) {
      const jobs = [...this.#unsentUpdates.values()];
      this.#unsentUpdates.clear();
      this.#unsentFrom.clear();
      sent.push(this.#client.query(prepared(this.#sql.jobs.updateJobs, updateJobsParams(jobs))));
    }
    if (sent.length > 0) await Promise.all(sent);
  }

  /**
   * The (queue, group_key) pairs whose queue_groups row the unsent writes'
   * triggers may write (jobs_fair_groups): a job that becomes pending or
   * moves its schedule_time, and a lease or a pending job that ends.
   */
  #groupsWritten(): Array<[string, string]> {
    const groups = new Map<string, [string, string]>();
    const add = (job: StoredJob) => groups.set(`${job.queue}\u0000${job.groupKey}`, [job.queue, job.groupKey]);
    for (const job of this.#unsentInserts) if (isPending(job.state)) add(job);
    for (const job of this.#unsentUpdates.values()) {
      const from = this.#unsentFrom.get(job.id);
      if (from === undefined || writesGroup(from, job)) add(job);
    }
    return [...groups.values()];
  }

  /** Runs a statement that reads jobs, sent right behind what the transaction wrote (it must see it). */
  async #afterFlush<T>(query: () => Promise<T>): Promise<T> {
    const [, result] = await Promise.all([this.flush(), query()]);
    return result;
  }

  async #rows(text: string, values: unknown[]): Promise<unknown[][]> {
    const result = await this.#client.query<unknown[]>(preparedArrays(text, values));
    return result.rows;
  }

  async #jobs(text: string, values: unknown[]): Promise<StoredJob[]> {
    const jobs = (await this.#afterFlush(() => this.#rows(text, values))).map(toStoredJob);
    for (const job of jobs) this.#held.set(job.id, job);
    return jobs;
  }

  /** What the transaction knows of its rows now, to put back if the operation after this mark is rolled back to its savepoint. */
  mark(): ReadonlyMap<string, StoredJob | undefined> {
    return new Map(this.#held);
  }

  restore(mark: ReadonlyMap<string, StoredJob | undefined>): void {
    this.#unsentInserts = [];
    this.#unsentUpdates.clear();
    this.#unsentFrom.clear();
    this.#held.clear();
    for (const [id, job] of mark) this.#held.set(id, job);
  }

  /** Locks the jobs with these ids (in id order) for the rest of the transaction. */
  async lockJobs(ids: readonly string[]): Promise<void> {
    const wanted = [...new Set(ids)].filter((id) => isUuid(id) && !this.#held.has(id)).sort();
    if (wanted.length === 0) return;
    // Rows not held yet: nothing unsent is among them, so no flush is needed.
    for (const row of await this.#rows(this.#sql.jobs.lockJobs, [wanted])) {
      const job = toStoredJob(row);
      this.#held.set(job.id, job);
    }
    for (const id of wanted) if (!this.#held.has(id)) this.#held.set(id, undefined);
  }

  async findJobs(ids: readonly string[]): Promise<Array<StoredJob | undefined>> {
    await this.lockJobs(ids);
    return ids.map((id) => this.#held.get(id));
  }

  async findByIdempotencyKeys(keys: ReadonlyArray<{ queue: string; key: string }>): Promise<Array<StoredJob | undefined>> {
    const rows = await this.#afterFlush(() =>
      this.#rows(this.#sql.jobs.jobsByIdempotencyKeys, [keys.map((k) => k.queue), keys.map((k) => k.key)]),
    );
    const found: Array<StoredJob | undefined> = keys.map(() => undefined);
    for (const row of rows) found[Number(row[row.length - 1]) - 1] = toStoredJob(row);
    return found;
  }

  insertJobs(jobs: readonly StoredJob[]): void {
    this.wrote = true;
    for (const job of jobs) {
      this.#unsentInserts.push(job);
      this.#held.set(job.id, job);
    }
  }

  updateJobs(jobs: readonly StoredJob[]): void {
    this.wrote = true;
    for (const job of jobs) {
      // A job created by this transaction and not sent yet is sent as it is now.
      const inserted = this.#unsentInserts.findIndex((j) => j.id === job.id);
      if (inserted >= 0) this.#unsentInserts[inserted] = job;
      else {
        if (!this.#unsentUpdates.has(job.id)) this.#unsentFrom.set(job.id, this.#held.get(job.id));
        this.#unsentUpdates.set(job.id, job);
      }
      this.#held.set(job.id, job);
    }
  }

  async insertDependencies(edges: readonly DependencyEdge[]): Promise<void> {
    this.wrote = true;
    const values = [edges.map((e) => e.jobId), edges.map((e) => e.position), edges.map((e) => e.dependsOnId)];
    await this.#afterFlush(() => this.#client.query(prepared(this.#sql.jobs.insertDependencies, values)));
    // The rows this transaction holds are kept as the database has them.
    for (const { dependsOnId } of edges) {
      const held = this.#held.get(dependsOnId);
      if (held !== undefined && !held.hasDependents) this.#held.set(dependsOnId, { ...held, hasDependents: true });
    }
  }

  async countDependencyChange(dependencyId: string, change: { completed: number; failed: number }): Promise<DependentCounts[]> {
    this.wrote = true;
    const count = () =>
      this.#client.query<DependentRow>(prepared(this.#sql.jobs.countDependencyChange, [dependencyId, change.completed, change.failed]));
    // The statement writes only the counts and acts on the WAITING dependents it returns: the unsent
    // writes matter to it only when they insert jobs (and their edges went already) or move a job
    // from WAITING. Otherwise they stay unsent, so that a batch of Completes is still one UPDATE.
    const { rows } = this.#unsentInserts.length > 0 || this.#unsentLeavesWaiting() ? await this.#afterFlush(count) : await count();
    const dependents = rows.map(dependentCounts);
    for (const d of dependents) {
      const held = this.#held.get(d.id);
      if (held !== undefined) this.#held.set(d.id, { ...held, dependencyCounts: d.counts });
    }
    return dependents;
  }

  #unsentLeavesWaiting(): boolean {
    for (const from of this.#unsentFrom.values()) if (from?.state === "waiting") return true;
    return false;
  }

  async dependencyResults(jobIds: readonly string[], limit: number): Promise<DependencyResult[][]> {
    const { rows } = await this.#afterFlush(() =>
      this.#client.query<DependencyResult & { ord: string }>(prepared(this.#sql.jobs.dependencyResults, [jobIds, limit])),
    );
    const results: DependencyResult[][] = jobIds.map(() => []);
    for (const { ord, ...result } of rows) results[Number(ord) - 1].push(result);
    return results;
  }

  selectClaimable(queue: string, now: number, limit: number): Promise<StoredJob[]> {
    return this.#jobs(this.#sql.jobs.claimable, [queue, now, limit]);
  }

  async nextScheduledTime(queue: string, now: number): Promise<number | null> {
    const { rows } = await this.#afterFlush(() =>
      this.#client.query<{ t: number | null }>(prepared(this.#sql.jobs.nextScheduledTime, [queue, now])),
    );
    return rows[0].t;
  }

  selectExpiredLeases(now: number, limit: number, queue?: string): Promise<StoredJob[]> {
    return queue === undefined
      ? this.#jobs(this.#sql.jobs.expiredLeases, [now, limit])
      : this.#jobs(this.#sql.jobs.expiredLeasesOfQueue, [now, queue, limit]);
  }

  selectJobsInStateBetween(queue: string, state: JobState, afterId: string, upToId: string, limit: number): Promise<StoredJob[]> {
    if (!isUuid(upToId)) return Promise.resolve([]);
    return this.#jobs(this.#sql.jobs.jobsInStateBetween, [queue, state, isUuid(afterId) ? afterId : NIL_UUID, upToId, limit]);
  }

  async isQueuePaused(queue: string): Promise<boolean> {
    return (await this.#client.query(prepared(this.#sql.jobs.queuePaused, [queue]))).rowCount! > 0;
  }

  async pauseQueue(queue: string, now: number): Promise<boolean> {
    const changed = (await this.#client.query(prepared(this.#sql.jobs.pauseQueue, [queue, now]))).rowCount! > 0;
    if (changed) this.wrote = true;
    return changed;
  }

  async resumeQueue(queue: string): Promise<boolean> {
    const changed = (await this.#client.query(prepared(this.#sql.jobs.resumeQueue, [queue]))).rowCount! > 0;
    if (changed) this.wrote = true;
    return changed;
  }

  async queueConfig(queue: string): Promise<QueueConfig | undefined> {
    const { rows } = await this.#client.query<QueueConfig>(prepared(this.#sql.limits.queueConfig, [queue]));
    return rows[0];
  }

  async setQueueConfig(queue: string, config: QueueConfig | undefined, now: number): Promise<void> {
    this.wrote = true;
    if (config === undefined) await this.#client.query(prepared(this.#sql.limits.deleteQueueConfig, [queue]));
    else await this.#client.query(prepared(this.#sql.limits.setQueueConfig, queueConfigParams(queue, config, now)));
  }

  async countRunning(queue: string, atMost: number): Promise<number> {
    const { rows } = await this.#afterFlush(() =>
      this.#client.query<{ n: number }>(prepared(this.#sql.limits.countRunning, [queue, atMost])),
    );
    return rows[0].n;
  }

  async leaseGrantsSince(queue: string, after: number): Promise<WindowGrants> {
    const { rows } = await this.#client.query<WindowGrants>(prepared(this.#sql.limits.leaseGrantsSince, [queue, after]));
    return rows[0];
  }

  async recordLeaseGrant(queue: string, at: number, leases: number, forgetThrough: number): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.recordLeaseGrant, [queue, at, leases, forgetThrough]));
  }

  async forgetLeaseGrants(queue: string): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.forgetLeaseGrants, [queue]));
  }

  async selectGroupsClaimable(queue: string, groupKeys: readonly string[], now: number, perGroup: number): Promise<StoredJob[][]> {
    const grouped = groupKeys.filter((k) => k !== "");
    const [ofGroups, ungrouped] = await Promise.all([
      grouped.length > 0 ? this.#jobs(this.#sql.limits.groupsClaimable, [queue, grouped, now, perGroup]) : [],
      grouped.length < groupKeys.length ? this.#jobs(this.#sql.limits.ungroupedClaimable, [queue, now, perGroup]) : [],
    ]);
    const byGroup = new Map<string, StoredJob[]>(groupKeys.map((k) => [k, []]));
    // Each group's rows come in its claim order (the LATERAL's ORDER BY).
    for (const job of [...ofGroups, ...ungrouped]) byGroup.get(job.groupKey)?.push(job);
    return groupKeys.map((k) => byGroup.get(k)!);
  }

  async readGroups(queue: string, groupKeys: readonly string[], read: GroupRead): Promise<GroupState[]> {
    if (groupKeys.length === 0) return [];
    const keys = [...groupKeys];
    type StateRow = { groupKey: string; running: number; leases: number; oldest: number | null };
    const [states, heads] = await this.#afterFlush(() =>
      Promise.all([
        this.#client.query<StateRow>(prepared(this.#sql.limits.groupStates, [queue, keys, read.runningAtMost, read.grantsAfter])),
        read.heads ? this.#rows(this.#sql.limits.orderedHeads, [queue, keys]) : Promise.resolve([]),
      ]),
    );
    const headOf = new Map<string, OrderedHead>();
    for (const row of heads) {
      const job = toStoredJob(row);
      const busy = row[row.length - 1] === true;
      // Only a head this transaction locked is known as its own row.
      if (!busy && job.state !== "running") this.#held.set(job.id, job);
      headOf.set(job.groupKey, { job, busy });
    }
    return states.rows.map((r) => ({
      groupKey: r.groupKey,
      running: r.running,
      grants: { leases: r.leases, oldest: r.oldest === null ? null : Number(r.oldest) },
      head: headOf.get(r.groupKey),
    }));
  }

  async recordGroupLeaseGrants(
    queue: string,
    at: number,
    grants: ReadonlyArray<{ groupKey: string; leases: number }>,
    forgetThrough: number,
  ): Promise<void> {
    this.wrote = true;
    const values = [queue, at, grants.map((g) => g.groupKey), grants.map((g) => g.leases), forgetThrough];
    await this.#client.query(prepared(this.#sql.limits.recordGroupLeaseGrants, values));
  }

  async forgetGroupLeaseGrants(queue: string): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.forgetGroupLeaseGrants, [queue]));
  }

  async selectDueGroups(queue: string, now: number, after: DueGroup | null, limit: number): Promise<DueGroup[]> {
    // After the flush: the triggers of the transaction's own job writes (a recovered lease) have run.
    const values = [queue, now, after?.servedSeq ?? -1, after?.groupKey ?? "", limit];
    const { rows } = await this.#afterFlush(() => this.#client.query<DueGroup>(prepared(this.#sql.limits.dueGroups, values)));
    return rows;
  }

  async parkGroup(queue: string, group: DueGroup, dueTime: number | null, heldBy: GroupLimit): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.parkGroup, [queue, group.groupKey, group.version, dueTime, heldBy]));
  }

  async heldGroupRule(queue: string): Promise<GroupLimit | null> {
    const { rows } = await this.#client.query<{ limit_: GroupLimit }>(prepared(this.#sql.limits.heldGroup, [queue]));
    return rows[0]?.limit_ ?? null;
  }

  async settleGroup(queue: string, group: DueGroup): Promise<void> {
    this.wrote = true;
    await this.#afterFlush(() => this.#client.query(prepared(this.#sql.limits.settleGroup, [queue, group.groupKey, group.version])));
  }

  async markGroupsServed(queue: string, groupKeys: readonly string[]): Promise<void> {
    if (groupKeys.length === 0) return;
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.markGroupsServed, [queue, groupKeys]));
  }

  async nextGroupDueTime(queue: string, now: number): Promise<number | null> {
    const { rows } = await this.#client.query<{ t: number | null }>(prepared(this.#sql.limits.nextGroupDueTime, [queue, now]));
    return rows[0].t;
  }

  async rebuildGroups(queue: string): Promise<void> {
    this.wrote = true;
    // SHARE waits for every transaction that wrote jobs and is still in
    // flight (their triggers saw the queue not fair) and keeps new writers
    // out until this one commits, when they see it fair.
    await this.#afterFlush(() => this.#client.query(this.#sql.limits.lockJobsForRebuild));
    await this.#client.query(prepared(this.#sql.limits.rebuildGroups, [queue]));
  }

  async dropGroups(queue: string): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.limits.dropGroups, [queue]));
  }

  async findSchedule(name: string): Promise<StoredSchedule | undefined> {
    const { rows } = await this.#client.query(prepared(this.#sql.schedules.scheduleByName, [name]));
    return rows.length === 0 ? undefined : toSchedule(rows[0] as Record<string, unknown>);
  }

  async upsertSchedule(schedule: StoredSchedule): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.schedules.upsertSchedule, scheduleParams(schedule)));
  }

  async deleteSchedule(name: string): Promise<boolean> {
    const deleted = (await this.#client.query(prepared(this.#sql.schedules.deleteSchedule, [name]))).rowCount! > 0;
    if (deleted) this.wrote = true;
    return deleted;
  }

  async selectDueSchedules(now: number, limit: number): Promise<StoredSchedule[]> {
    const { rows } = await this.#client.query(prepared(this.#sql.schedules.dueSchedules, [now, limit]));
    return rows.map((r) => toSchedule(r as Record<string, unknown>));
  }

  async recordScheduleRuns(runs: readonly ScheduleRunUpdate[]): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.schedules.recordScheduleRuns, scheduleRunParams(runs)));
  }

  async selectPrunable(state: PrunableState, finishedBefore: number, limit: number): Promise<PrunableJob[]> {
    const { rows } = await this.#afterFlush(() =>
      this.#client.query<PrunableJob>(prepared(this.#sql.jobs.prunable, [state, finishedBefore, limit])),
    );
    return rows;
  }

  async deleteJobs(ids: readonly string[]): Promise<{ events: number }> {
    this.wrote = true;
    const { rows } = await this.#afterFlush(() => this.#client.query<{ events: number }>(prepared(this.#sql.jobs.deleteJobs, [ids])));
    for (const id of ids) this.#held.set(id, undefined);
    return { events: Number(rows[0].events) };
  }

  async touchWriteProbe(now: number): Promise<void> {
    this.wrote = true;
    await this.#client.query(prepared(this.#sql.jobs.touchWriteProbe, [now]));
  }

  async addCountDeltas(deltas: readonly CountDelta[]): Promise<void> {
    await this.#client.query(prepared(this.#sql.counts.appendDeltas, countDeltaParams(deltas)));
  }

  /** Delta rows, folded into the samples by compact_queue_activity() (queue-activity-sql.ts): no row every writer waits on. */
  async addActivity(deltas: readonly ActivityDelta[]): Promise<void> {
    await this.#client.query(prepared(this.#sql.activity.appendDeltas, [activityDeltaParam(deltas)]));
  }

  /** The deltas folded first (queue-activity-sql.ts), so the oldest samples are whole rows of queue_activity. */
  async deleteActivityBefore(beforeMinute: number, limit: number): Promise<number> {
    await this.#client.query(prepared(this.#sql.activity.foldForPruning));
    const { rowCount } = await this.#client.query(prepared(this.#sql.activity.deleteBefore, [beforeMinute, limit]));
    if ((rowCount ?? 0) > 0) this.wrote = true;
    return rowCount ?? 0;
  }

  /**
   * Records the events as the transaction's last statement: numbered at once
   * when the sequence row is free, else unnumbered (sequence 0 in the
   * answer), for the sequencer to number after the commit (event-sequencer.ts).
   */
  async insertEvents(drafts: readonly EventDraft[]): Promise<JobEvent[]> {
    const { rows } = await this.#client.query<{ first_sequence: number | null }>(
      prepared(this.#sql.events.recordEvents, unsequencedEventParams(drafts)),
    );
    const first = rows[0].first_sequence;
    return drafts.map((draft, i) => ({ sequence: first === null ? 0 : first + i, ...draft }));
  }
}

const isPending = (state: JobState): boolean => state === "queued" || state === "retry";

/** Whether the fair-groups trigger writes the job's group row for this change of its row (migration 6, jobs_fair_groups). */
function writesGroup(from: StoredJob, to: StoredJob): boolean {
  if (isPending(to.state)) return !isPending(from.state) || to.scheduleTime !== from.scheduleTime;
  return (from.state === "running" && to.state !== "running") || (isPending(from.state) && to.state === "cancelled");
}
