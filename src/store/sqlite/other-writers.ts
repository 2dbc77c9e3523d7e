/**
 * Commits made through other connections to the same database file:
 * another SqliteStore (a second instance in this process, or another
 * process such as `leasequeue prune`). The store announces them to its own
 * listeners like its own commits (Store.onCommitted), so dispatch hears of
 * every commit on the database, whoever made it.
 *
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
import type { JobEvent } from "../../domain/job.js";
import { NO_QUEUE_LIMITS, sameConfig, type QueueConfig } from "../../domain/queue-limits.js";
import type { QueueControlChange } from "../store.js";
import { toEvent, type Row } from "./rows.js";
import type { SqliteStatements } from "./sql.js";

/** Events read per query when catching up. */
const PAGE = 1000;

export class OtherWriters {
  readonly #stmts: SqliteStatements;
  #dataVersion: number;
  readonly #paused: Set<string>;
  /** Queue limits as last seen, by queue (queues without a config row are absent). */
  #configs: Map<string, QueueConfig>;

  constructor(stmts: SqliteStatements) {
    this.#stmts = stmts;
    this.#dataVersion = stmts.dataVersion.get() as number;
    this.#paused = new Set(this.#readPaused());
    this.#configs = this.#readConfigs();
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

  /** Stored events with after < sequence <= upTo, oldest first. */
  eventsBetween(after: number, upTo: number): JobEvent[] {
    const events: JobEvent[] = [];
    let from = after;
    while (from < upTo) {
      const rows = this.#stmts.eventsAfter.all({ after: from, limit: PAGE }) as Row[];
      for (const row of rows) {
        const event = toEvent(row);
        if (event.sequence > upTo) return events;
        events.push(event);
      }
      if (rows.length < PAGE) break;
      from = events.at(-1)!.sequence;
    }
    return events;
  }

  /** Queues paused, resumed or given other limits by other writers since the last look. */
  queueControlChanges(): QueueControlChange[] {
    const now = new Set(this.#readPaused());
    const changes: QueueControlChange[] = [];
    for (const queue of now) if (!this.#paused.has(queue)) changes.push({ queue, paused: true });
    for (const queue of this.#paused) if (!now.has(queue)) changes.push({ queue, paused: false });
    this.#paused.clear();
    for (const queue of now) this.#paused.add(queue);
    const configs = this.#readConfigs();
    for (const queue of new Set([...this.#configs.keys(), ...configs.keys()])) {
      const config = configs.get(queue) ?? { ...NO_QUEUE_LIMITS };
      if (!sameConfig(this.#configs.get(queue) ?? NO_QUEUE_LIMITS, config)) changes.push({ queue, paused: now.has(queue), config });
    }
    this.#configs = configs;
    return changes;
  }

  /** Takes this store's own queue controls into account, so they are not reported as others'. */
  noteOwn(changes: readonly QueueControlChange[]): void {
    for (const c of changes) {
      if (c.paused) this.#paused.add(c.queue);
      else this.#paused.delete(c.queue);
      if (c.config === undefined) continue;
      if (sameConfig(c.config, NO_QUEUE_LIMITS)) this.#configs.delete(c.queue);
      else this.#configs.set(c.queue, c.config);
    }
  }

  #readConfigs(): Map<string, QueueConfig> {
    const rows = this.#stmts.queueConfigs.all() as Array<{ queue: string } & QueueConfig>;
    return new Map(rows.map(({ queue, maxRunning, rateLimit, ratePeriodMs }) => [queue, { maxRunning, rateLimit, ratePeriodMs }]));
  }

  #readPaused(): string[] {
    return (this.#stmts.pausedQueues.all() as Array<{ queue: string }>).map((r) => r.queue);
  }
}
