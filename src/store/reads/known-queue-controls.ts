/**
 * Queue controls (pauses, docs/api.md "Queue controls"; limits,
 * "Queue limits") are not job events, so a store hears of another server's
 * changes by comparing what the database holds now with what it last saw.
 * This keeps what was last seen, for any engine: SQLite compares after
 * another connection's commit (sqlite/other-writers.ts), PostgreSQL at each
 * catch-up (a NOTIFY may be lost; postgres/pg-store.ts).
 */
import { NO_QUEUE_LIMITS, pickConfig, sameConfig, type QueueConfig } from "../../domain/queue-limits.js";
import type { QueueControlChange } from "../store.js";

/** The queue controls a database holds at one moment. */
export interface QueueControlSnapshot {
  paused: readonly string[];
  /** Queues with a config row (queues without one have no limits). */
  configs: ReadonlyArray<{ queue: string } & QueueConfig>;
}

export class KnownQueueControls {
  readonly #paused = new Set<string>();
  /** Queue limits as last seen, by queue (queues without a config row are absent). */
  #configs = new Map<string, QueueConfig>();

  constructor(snapshot: QueueControlSnapshot) {
    this.#take(snapshot);
  }

  /**
   * The changes from what was last seen to `snapshot`, which is what is seen
   * from now on. Queues in `unsettled` are left as they were seen: this
   * store changed them while the snapshot was read, so the snapshot may hold
   * their state before or after that change, and the store notes its own.
   */
  changesTo(snapshot: QueueControlSnapshot, unsettled: ReadonlySet<string> = new Set()): QueueControlChange[] {
    const paused = new Set([...snapshot.paused].filter((q) => !unsettled.has(q)));
    for (const queue of unsettled) if (this.#paused.has(queue)) paused.add(queue);
    const configs = configsOf(snapshot);
    for (const queue of unsettled) {
      const known = this.#configs.get(queue);
      if (known === undefined) configs.delete(queue);
      else configs.set(queue, known);
    }
    const changes: QueueControlChange[] = [];
    for (const queue of paused) if (!this.#paused.has(queue)) changes.push({ queue, paused: true });
    for (const queue of this.#paused) if (!paused.has(queue)) changes.push({ queue, paused: false });
    for (const queue of new Set([...this.#configs.keys(), ...configs.keys()])) {
      const config = configs.get(queue) ?? { ...NO_QUEUE_LIMITS };
      if (!sameConfig(this.#configs.get(queue) ?? NO_QUEUE_LIMITS, config)) changes.push({ queue, paused: paused.has(queue), config });
    }
    this.#paused.clear();
    for (const queue of paused) this.#paused.add(queue);
    this.#configs = configs;
    return changes;
  }

  /**
   * Takes changes already announced (this store's own, or notified) into
   * account, so they are not reported again. Answers those that changed
   * what was known: a notified change that a catch-up already saw and
   * announced changes nothing.
   */
  note(changes: readonly QueueControlChange[]): QueueControlChange[] {
    const fresh: QueueControlChange[] = [];
    for (const c of changes) {
      const pausedBefore = this.#paused.has(c.queue);
      if (pausedBefore !== c.paused || (c.config !== undefined && !sameConfig(this.#configs.get(c.queue) ?? NO_QUEUE_LIMITS, c.config)))
        fresh.push(c);
      if (c.paused) this.#paused.add(c.queue);
      else this.#paused.delete(c.queue);
      if (c.config === undefined) continue;
      if (sameConfig(c.config, NO_QUEUE_LIMITS)) this.#configs.delete(c.queue);
      else this.#configs.set(c.queue, c.config);
    }
    return fresh;
  }

  #take(snapshot: QueueControlSnapshot): void {
    this.#paused.clear();
    for (const queue of snapshot.paused) this.#paused.add(queue);
    this.#configs = configsOf(snapshot);
  }
}

function configsOf(snapshot: QueueControlSnapshot): Map<string, QueueConfig> {
  return new Map(snapshot.configs.map((row) => [row.queue, pickConfig(row)]));
}
