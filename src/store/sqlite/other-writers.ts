/**
 * Commits made through other connections to the same database file:
 * another SqliteStore (a second instance in this process, or another
 * process such as `leasequeue prune`). The store announces them to its own
 * listeners like its own commits (Store.onCommitted), so dispatch hears of
 * every commit on the database, whoever made it.
 */
import type { JobEvent } from "../../domain/job.js";
import { KnownQueueControls, type QueueControlSnapshot } from "../reads/known-queue-controls.js";
import type { QueueControlChange } from "../store.js";
import { toEvent, type Row } from "./rows.js";
import { configFromRow, type QueueConfigRow, type SqliteStatements } from "./sql.js";

/**
 * How they are found, cheaply:
 * - `PRAGMA data_version` changes when another connection has committed;
 *   asking costs no page read, so the store asks on a short timer.
 * - SQLite has one writer at a time and events are numbered under its
 *   write lock, so sequence order is commit order: every event with a
 *   sequence above the last one announced, up to the highest issued, is
 *   new, and none can still appear below it. The store also looks at each
 *   BEGIN (under the write lock), so another writer's events are always
 *   announced before this store's own later ones.
 * - Queue controls have no events: the paused queues and the queue limits
 *   are compared with those last seen.
 * What cannot be announced: heartbeats that were not stored (their
 * `unrecorded` drafts exist only in the writer's memory), and events
 * pruned before this store read them (retention only deletes jobs finished
 * long ago, so in practice never).
 */
export class OtherWriters {
  readonly #stmts: SqliteStatements;
  #dataVersion: number;
  readonly #controls: KnownQueueControls;
  /** The schedules table as last seen: how many rows and the latest update (a create, replace or delete changes one). */
  #schedules: string;

  constructor(stmts: SqliteStatements) {
    this.#stmts = stmts;
    this.#dataVersion = stmts.dataVersion.get() as number;
    this.#controls = new KnownQueueControls(this.#readControls());
    this.#schedules = this.#readSchedules();
  }

  /** The data version now, when it differs from the one last acknowledged (another connection committed). */
  changedVersion(): number | undefined {
    const version = this.#stmts.dataVersion.get() as number;
    return version === this.#dataVersion ? undefined : version;
  }

  /** Marks what `changedVersion` returned as looked at. */
  acknowledge(version: number): void {
    this.#dataVersion = version;
  }

  /** The highest sequence ever issued on the database. */
  latestSequence(): number {
    return (this.#stmts.lastSequence.get() as { seq: number }).seq;
  }

  /** Up to `limit` stored events with a sequence above `after`, oldest first. */
  eventsAfter(after: number, limit: number): JobEvent[] {
    return (this.#stmts.eventsAfter.all({ after, limit }) as Row[]).map(toEvent);
  }

  /** Queues paused, resumed or given other limits by other writers since the last look. */
  queueControlChanges(): QueueControlChange[] {
    return this.#controls.changesTo(this.#readControls());
  }

  /** Takes this store's own queue controls into account, so they are not reported as others'. */
  noteOwn(changes: readonly QueueControlChange[]): void {
    this.#controls.note(changes);
  }

  /** Whether schedules were created, replaced or deleted since the last look (by anyone: this store's own too). */
  schedulesChanged(): boolean {
    const now = this.#readSchedules();
    if (now === this.#schedules) return false;
    this.#schedules = now;
    return true;
  }

  #readSchedules(): string {
    const { n, t } = this.#stmts.schedulesSignature.get() as { n: number; t: number };
    return `${n}:${t}`;
  }

  #readControls(): QueueControlSnapshot {
    return {
      paused: (this.#stmts.pausedQueues.all() as Array<{ queue: string }>).map((r) => r.queue),
      configs: (this.#stmts.queueConfigs.all() as Array<QueueConfigRow & { queue: string }>).map(configFromRow),
    };
  }
}
