/**
 * Events announced in sequence order, each once (the order Store.onCommitted
 * promises), whoever committed them: the part of announcing that every
 * engine shares. The announcer keeps the highest sequence announced; asked
 * to announce through a higher one, it reads the stored events after it,
 * a page at a time, and hands each page on. Calls take turns: one whose
 * reads wait (PostgreSQL) starts after the previous call's last page, and
 * one over reads that answer at once (SQLite) runs at once. While nobody
 * listens, events are passed over unread.
 */
import type { JobEvent } from "../../domain/job.js";
import { isPromiseLike } from "../operations/steps.js";
import type { Awaitable } from "../transaction-port.js";

export interface OrderedAnnouncerOptions {
  /** The highest sequence issued when the store opened: only later events are announced. */
  announcedThrough: number;
  /** Stored events with a sequence above `after`, oldest first, at most `limit`. */
  readAfter(after: number, limit: number): Awaitable<JobEvent[]>;
  /** Whether anyone listens now. */
  listening(): boolean;
  /** Told when events were passed over unread because nobody listened. Default: nothing. */
  passedOver?(): void;
  /** Events per read, and so at most per page handed on. Default 1000. */
  pageSize?: number;
}

/**
 * The engine keeps what it learns from its own transactions and
 * notifications: when to ask (another writer's commit found, a
 * notification of numbered events), what else a change carries, and
 * whether an event is its own.
 */
export class OrderedAnnouncer {
  readonly #opts: OrderedAnnouncerOptions;
  readonly #pageSize: number;
  #through: number;
  /** The call under way when it waits for a read; the next call starts after it. */
  #tail: Promise<void> | undefined;

  constructor(options: OrderedAnnouncerOptions) {
    this.#opts = options;
    this.#pageSize = options.pageSize ?? 1000;
    this.#through = options.announcedThrough;
  }

  /** The highest sequence announced (or passed over, or announced by the engine itself). */
  get announcedThrough(): number {
    return this.#through;
  }

  /** The engine announced the events up to `sequence` itself (its own commit's, with the rest of that commit). */
  announcedUpTo(sequence: number): void {
    if (sequence > this.#through) this.#through = sequence;
  }

  /**
   * Announces every stored event up to `through` not announced yet, oldest
   * first, in pages handed to `announce`; settles once it has. `held`:
   * events the caller holds already, ending at `through` (its own, just
   * numbered); when they follow the last one announced directly, they are
   * handed on without a read. A failed read fails this call only: the
   * next call reads from where this one stopped.
   */
  announceThrough(through: number, announce: (events: JobEvent[]) => void, held?: readonly JobEvent[]): Awaitable<void> {
    const run = () => this.#announce(through, announce, held);
    if (this.#tail === undefined) {
      const done = run();
      return isPromiseLike(done) ? this.#queued(done) : done;
    }
    return this.#queued(this.#tail.then(run));
  }

  /** Resolves once every call so far has settled. */
  idle(): Promise<void> {
    return this.#tail ?? Promise.resolve();
  }

  #queued(call: Promise<void>): Promise<void> {
    const tail: Promise<void> = call
      .catch(() => {})
      .then(() => {
        if (this.#tail === tail) this.#tail = undefined;
      });
    this.#tail = tail;
    return call;
  }

  #announce(through: number, announce: (events: JobEvent[]) => void, held: readonly JobEvent[] | undefined): Awaitable<void> {
    if (held !== undefined && held.length > 0 && held[0].sequence === this.#through + 1 && this.#opts.listening()) {
      this.#through = through;
      announce([...held]);
      return;
    }
    return this.#readUpTo(through, announce);
  }

  #readUpTo(through: number, announce: (events: JobEvent[]) => void): Awaitable<void> {
    while (this.#through < through) {
      if (!this.#opts.listening()) {
        this.#through = through;
        this.#opts.passedOver?.();
        return;
      }
      const page = this.#opts.readAfter(this.#through, this.#pageSize);
      if (isPromiseLike(page)) {
        return page.then((rows) => {
          if (this.#handOn(rows, through, announce)) return this.#readUpTo(through, announce);
        });
      }
      if (!this.#handOn(page, through, announce)) return;
    }
  }

  /** Announces the page's events up to `through`; true when more may follow it. */
  #handOn(rows: JobEvent[], through: number, announce: (events: JobEvent[]) => void): boolean {
    const events = rows.filter((e) => e.sequence <= through);
    if (events.length > 0) {
      this.#through = events[events.length - 1].sequence;
      announce(events);
    }
    if (events.length === rows.length && rows.length === this.#pageSize) return true;
    // Read to the end, or past `through`: nothing else is left up to it (events pruned meanwhile leave a gap).
    this.#through = through;
    return false;
  }
}
