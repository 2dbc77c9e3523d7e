/**
 * WatchEvents: fans committed job events out to subscribers, resumable from a
 * sequence number with no gap and no duplicate.
 */
import { SERVER_DEFAULTS } from "../config/defaults.js";
import { QueueError } from "../domain/errors.js";
import type { JobEvent } from "../domain/job.js";
import { KEEPALIVE_INTERVAL_MS } from "../domain/timing-defaults.js";
import type { Store } from "../store/store.js";
import { Wakeup } from "./wakeup.js";

export interface WatchSpec {
  /** Only events of this queue. */
  queue?: string;
  /** Only events of this job. */
  jobId?: string;
  /** Replay stored events with a larger sequence first; absent: only events committed from now on. */
  afterSequence?: number;
}

export interface EventFeedOptions {
  /** Most events buffered per subscriber before it is dropped. Default 10 000. */
  bufferLimit?: number;
  /** Most bytes waiting in a live subscriber's connection before it is dropped (see WatchOutputProbe). Default SERVER_DEFAULTS.watchMaxPendingBytes. */
  maxPendingBytes?: number;
  /** Most watches at once; one more is refused with TOO_MANY_SUBSCRIBERS. Default SERVER_DEFAULTS.maxWatchers. */
  maxSubscribers?: number;
  /** Most events in one batch of watchBatches. Default 1000. */
  maxBatch?: number;
  /** Idle interval between keepalives. Default 15 s. */
  keepaliveMs?: number;
  /** Stored events read per replay query. Default 100: a page is also what the event loop spends on a replay between two turns for everything else. */
  pageSize?: number;
}

export interface EventFeedStats {
  /** Subscribers currently receiving events. */
  subscribers: number;
  /** Events handed to subscribers' transports since start. */
  eventsSent: number;
  /** Subscribers ended by the server, by reason. */
  dropped: Record<DropReason, number>;
}

/**
 * Why the server ended a watch: `buffer_full` (more than `bufferLimit` events
 * waited for the transport to take them), `output_full` (more than
 * `maxPendingBytes` waited in the connection for the client to read them).
 */
export type DropReason = "buffer_full" | "output_full";

/** How a transport tells the feed what is still waiting in a watch's connection. */
export interface WatchOutputProbe {
  /** Bytes of this watch written to the connection that the client has not taken yet, as far as the server can see. */
  pendingOutputBytes(): number;
  /**
   * Undefined when the transport takes more now; otherwise resolves once it
   * has passed what it holds on (the client read it) or the call ended. A
   * replay reads its next page only then.
   */
  whenDrained?(): Promise<void> | undefined;
}

class EventWatcher extends Wakeup {
  /** Live events not yet sent: `buffer[head..]`. */
  #buffer: JobEvent[] = [];
  #head = 0;
  /** The commit that delivered the newest buffered event. */
  #commit = 0;
  /** Still replaying stored events: an overflow discards the buffer instead of dropping the subscriber. */
  replaying: boolean;
  /** Set when the buffer overflowed while replaying; the replay must read again. */
  lossy = false;
  /** Set when the subscriber was dropped while live; the watch must end. */
  overflowed: DropReason | undefined;
  detached = false;

  constructor(
    readonly spec: WatchSpec,
    readonly limit: number,
    replaying: boolean,
    readonly output: WatchOutputProbe | undefined,
    readonly maxPendingBytes: number,
  ) {
    super();
    this.replaying = replaying;
  }

  get pending(): number {
    return this.#buffer.length - this.#head;
  }

  /**
   * Buffers a matching event of commit number `commit`; returns false when
   * that dropped the (live) subscriber. A live subscriber is dropped when a
   * commit finds more than `limit` events of earlier commits still waiting:
   * it had its chance to read them. One big commit (a group of SubmitBatch
   * calls) does not drop a subscriber that keeps up.
   */
  push(e: JobEvent, commit: number): boolean {
    if (this.overflowed !== undefined) return true;
    if (commit !== this.#commit) {
      this.#commit = commit;
      if (!this.replaying) {
        const reason = this.pending > this.limit ? "buffer_full" : this.outputFull() ? "output_full" : undefined;
        if (reason !== undefined) {
          this.drop(reason);
          return false;
        }
      }
    }
    this.#buffer.push(e);
    if (this.replaying && this.pending > this.limit) {
      // Everything buffered is also stored: let the replay read it again.
      this.#clear();
      this.lossy = true;
    }
    this.wake();
    return true;
  }

  /** True when the connection holds more than `maxPendingBytes` the client has not read. */
  outputFull(): boolean {
    return this.output !== undefined && this.output.pendingOutputBytes() > this.maxPendingBytes;
  }

  /** Ends the live subscriber: frees the buffer and wakes the watch to end with SUBSCRIBER_TOO_SLOW. */
  drop(reason: DropReason): void {
    this.#clear();
    this.overflowed = reason;
    this.wake();
  }

  /** Takes up to `max` waiting events, oldest first (empty when none waits). */
  takeUpTo(max: number): JobEvent[] {
    if (this.#head >= this.#buffer.length) return [];
    if (this.#head === 0 && this.#buffer.length <= max) {
      const all = this.#buffer;
      this.#clear();
      return all;
    }
    const taken = this.#buffer.slice(this.#head, this.#head + max);
    this.#head += taken.length;
    if (this.#head === this.#buffer.length) this.#clear();
    else if (this.#head >= 1024 && this.#head * 2 >= this.#buffer.length) {
      this.#buffer = this.#buffer.slice(this.#head);
      this.#head = 0;
    }
    return taken;
  }

  #clear(): void {
    this.#buffer = [];
    this.#head = 0;
  }
}

/**
 * - One store.onCommitted subscription for the whole server. A commit is
 *   routed through three indexes (unfiltered, by queue, by job id), so it
 *   costs a few map lookups plus one push per interested subscriber, however
 *   many subscribers watch other things. Idle subscribers cost nothing but a
 *   keepalive timer: no polling.
 * - The seam: a subscriber is registered (and starts buffering live events)
 *   BEFORE the stored events are read. The replay pages through the store
 *   (`pageSize` rows per read, so the event loop is never held long; other
 *   callbacks run between two pages, and a page is read only once the
 *   transport has passed the last one on: docs/api.md "WatchEvents limits") until
 *   a page comes back short; then the buffer is drained, skipping every
 *   sequence already sent. Sequences strictly increase, so "skip <= last
 *   sent" removes exactly the overlap between the replay and the buffer.
 * - Bounded memory: a subscriber holds at most `bufferLimit` events plus one
 *   commit's worth (references to event objects shared by all subscribers).
 *   While replaying, an overflow only discards the buffer (everything in it
 *   is also stored) and the replay reads on until it catches up with an
 *   intact buffer. Once live, a commit that finds more than `bufferLimit`
 *   events still waiting means the client reads slower than events are
 *   committed: the buffer is freed, the subscriber detached, and the watch
 *   ends with SUBSCRIBER_TOO_SLOW naming the last sequence it sent.
 * - Bounded output: the transport may report how many bytes of a watch
 *   are still waiting in its connection (`pendingOutputBytes`). A live
 *   subscriber whose connection holds more than `maxPendingBytes` when a
 *   commit arrives, or when it would be handed more events, is not reading:
 *   it is dropped like one whose buffer is full (`output_full`). This
 *   catches clients that never read even where the events leave the buffer
 *   at once (HTTP/1.1 writes that the socket accepts).
 * - Bounded subscribers: at most `maxSubscribers` watches at once; one more
 *   is refused (TOO_MANY_SUBSCRIBERS) before it is registered.
 * - Batches: `watchBatches` hands out everything a subscriber has pending in
 *   one array, so a transport can write many events with one write.
 * - Pruned history: a replay must not skip events silently, so one that
 *   starts before the store's `eventBounds().oldest` (the first sequence of
 *   the unbroken history, past every pruned event; see Store) is refused
 *   with REPLAY_TOO_OLD, before the first page and again after every page
 *   (a prune may commit while a replay reads).
 * - Only stored events are fanned out: a heartbeat the heartbeat policy did
 *   not store has no sequence, so a live watch and a replay from the same
 *   sequence always carry the same events.
 * - The first item of every watch is a keepalive, produced after the
 *   subscriber is registered: the transport sends response headers with the
 *   first message, and a client that has seen them knows that everything
 *   committed afterwards will reach it. An idle watch yields another
 *   keepalive every `keepaliveMs`.
 */
export class EventFeed {
  readonly #store: Store;
  readonly #bufferLimit: number;
  readonly #maxPendingBytes: number;
  readonly #maxSubscribers: number;
  readonly #maxBatch: number;
  readonly #keepaliveMs: number;
  readonly #pageSize: number;
  readonly #all = new Set<EventWatcher>();
  readonly #byQueue = new Map<string, Set<EventWatcher>>();
  readonly #byJob = new Map<string, Set<EventWatcher>>();
  readonly #unsubscribe: () => void;
  #commits = 0;
  #eventsSent = 0;
  readonly #dropped: Record<DropReason, number> = { buffer_full: 0, output_full: 0 };
  #closed = false;

  constructor(store: Store, options: EventFeedOptions = {}) {
    this.#store = store;
    this.#bufferLimit = options.bufferLimit ?? 10_000;
    this.#maxPendingBytes = options.maxPendingBytes ?? SERVER_DEFAULTS.watchMaxPendingBytes;
    this.#maxSubscribers = options.maxSubscribers ?? SERVER_DEFAULTS.maxWatchers;
    this.#maxBatch = options.maxBatch ?? 1000;
    this.#keepaliveMs = options.keepaliveMs ?? KEEPALIVE_INTERVAL_MS;
    this.#pageSize = options.pageSize ?? 100;
    this.#unsubscribe = store.onCommitted(({ events }) => {
      if (events.length === 0) return;
      const commit = ++this.#commits;
      for (const e of events) this.#route(e, commit);
    });
  }

  get stats(): EventFeedStats {
    return { subscribers: this.#subscriberCount(), eventsSent: this.#eventsSent, dropped: { ...this.#dropped } };
  }

  /**
   * The events of one watch, oldest first, in batches; `null` is a
   * keepalive. Each batch holds every event the subscriber had waiting (at
   * most `maxBatch`, default the feed's; a replay page at most `pageSize`;
   * never empty), so a transport can send them with one write. The
   * subscriber is registered when iteration starts, and the first item is a
   * keepalive produced right after that. Throws QueueError (before the first
   * keepalive for a bad `afterSequence` or when `maxSubscribers` watches are
   * open; later when the subscriber is too slow). Ends quietly when `signal`
   * aborts or the feed closes; the caller decides what that means on the wire.
   * `output` lets the feed see the bytes still waiting in the connection
   * (dropped past `maxPendingBytes`).
   */
  async *watchBatches(
    spec: WatchSpec,
    signal: AbortSignal,
    { output, maxBatch = this.#maxBatch }: { output?: WatchOutputProbe; maxBatch?: number } = {},
  ): AsyncGenerator<JobEvent[] | null, void, undefined> {
    const replay = spec.afterSequence !== undefined;
    // A live watch starts after the latest sequence read here, before
    // registering: what it buffers is committed later, so has a larger sequence.
    const bounds = await this.#store.eventBounds();
    if (replay) this.#checkResumable(spec.afterSequence!, bounds);
    if (signal.aborted || this.#closed) return;
    if (this.#subscriberCount() >= this.#maxSubscribers) {
      throw new QueueError(
        "TOO_MANY_SUBSCRIBERS",
        `this server already serves ${this.#maxSubscribers} WatchEvents streams, its limit ` +
          `(LEASEQUEUE_MAX_WATCHERS); close a watch or retry later`,
        { limit: String(this.#maxSubscribers) },
      );
    }
    const sub = new EventWatcher(spec, this.#bufferLimit, replay, output, this.#maxPendingBytes);
    this.#attach(sub);
    try {
      // The highest sequence this watch has handed out (or its starting point):
      // a client that has seen it resumes with after_sequence = sent.
      let sent = spec.afterSequence ?? bounds.latest;
      yield null;

      while (sub.replaying) {
        // A replay reads no faster than its client takes it: the server holds
        // at most a page of it, whatever the client's pace.
        const drained = output?.whenDrained?.();
        if (drained !== undefined) await untilDone(drained, signal);
        if (signal.aborted || this.#closed) return;
        // From here on every commit is buffered, unless the buffer overflows
        // (lossy); every commit before is visible to this read.
        sub.lossy = false;
        const page = await this.#store.listEvents({
          afterSequence: sent,
          limit: this.#pageSize,
          queue: spec.queue,
          jobId: spec.jobId,
        });
        // Events pruned while replaying must not vanish silently either.
        this.#checkResumable(sent, await this.#store.eventBounds());
        if (signal.aborted || this.#closed) return;
        if (page.length > 0) {
          sent = page.at(-1)!.sequence;
          this.#eventsSent += page.length;
          yield page;
        }
        // Caught up, and the buffer holds every event committed since the read.
        if (page.length < this.#pageSize && !sub.lossy) sub.replaying = false;
        // Between pages, the calls that arrived meanwhile (the writers') run first.
        else await nextTurn();
      }

      while (!signal.aborted && !this.#closed) {
        if (sub.overflowed !== undefined) {
          const why =
            sub.overflowed === "buffer_full"
              ? `fell more than ${this.#bufferLimit} events behind`
              : `left more than ${this.#maxPendingBytes} bytes unread in its connection`;
          throw new QueueError(
            "SUBSCRIBER_TOO_SLOW",
            `the subscriber ${why} and was dropped; ` + `resume with after_sequence=${sent} (the last sequence sent on this stream)`,
            { reason: sub.overflowed, afterSequence: String(sent) },
          );
        }
        // The transport may have learnt meanwhile that the client stopped
        // reading (a kernel sample): do not hand it more.
        if (sub.pending > 0 && sub.outputFull()) {
          sub.drop("output_full");
          this.#dropped.output_full++;
          this.#detach(sub);
          continue;
        }
        const taken = sub.takeUpTo(maxBatch);
        if (taken.length > 0) {
          // Skip what the replay already sent (only at the seam).
          const fresh = taken[0].sequence > sent ? taken : taken.filter((e) => e.sequence > sent);
          if (fresh.length === 0) continue;
          sent = fresh.at(-1)!.sequence;
          this.#eventsSent += fresh.length;
          yield fresh;
          continue;
        }
        const woken = await sub.wait(this.#keepaliveMs, signal);
        if (!woken && !signal.aborted) yield null;
      }
    } finally {
      this.#detach(sub);
    }
  }

  /** Stops following the store and ends every watch. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    for (const sub of this.#subscribersList()) sub.wake();
  }

  /** Throws unless every stored event after `after` can still be replayed. */
  #checkResumable(after: number, { oldest, latest }: { oldest: number; latest: number }): void {
    if (after > latest) {
      throw new QueueError(
        "SEQUENCE_NOT_ISSUED",
        `after_sequence ${after} is beyond the latest sequence this server has issued (${latest}); ` +
          `it comes from another event history (a replaced or restored database?). ` +
          `Watch without after_sequence, or resume from a sequence this server sent`,
      );
    }
    // With no stored events at all, the next sequence to be issued is the oldest available.
    const oldestAvailable = oldest > 0 ? oldest : latest + 1;
    if (after < oldestAvailable - 1) {
      throw new QueueError(
        "REPLAY_TOO_OLD",
        `events after sequence ${after} are no longer stored: the oldest available sequence is ${oldestAvailable}; ` +
          `resume with after_sequence=${oldestAvailable - 1} to replay everything still stored`,
      );
    }
  }

  #route(e: JobEvent, commit: number): void {
    for (const sub of this.#all) this.#deliver(sub, e, commit);
    const byQueue = this.#byQueue.get(e.queue);
    if (byQueue !== undefined) for (const sub of byQueue) this.#deliver(sub, e, commit);
    const byJob = this.#byJob.get(e.jobId);
    if (byJob !== undefined) {
      for (const sub of byJob) if (sub.spec.queue === undefined || sub.spec.queue === e.queue) this.#deliver(sub, e, commit);
    }
  }

  #deliver(sub: EventWatcher, e: JobEvent, commit: number): void {
    if (!sub.push(e, commit)) {
      this.#dropped[sub.overflowed!]++;
      this.#detach(sub);
    }
  }

  #attach(sub: EventWatcher): void {
    const { queue, jobId } = sub.spec;
    if (jobId !== undefined) addTo(this.#byJob, jobId, sub);
    else if (queue !== undefined) addTo(this.#byQueue, queue, sub);
    else this.#all.add(sub);
  }

  #detach(sub: EventWatcher): void {
    if (sub.detached) return;
    sub.detached = true;
    const { queue, jobId } = sub.spec;
    if (jobId !== undefined) removeFrom(this.#byJob, jobId, sub);
    else if (queue !== undefined) removeFrom(this.#byQueue, queue, sub);
    else this.#all.delete(sub);
  }

  #subscriberCount(): number {
    let n = this.#all.size;
    for (const set of this.#byQueue.values()) n += set.size;
    for (const set of this.#byJob.values()) n += set.size;
    return n;
  }

  #subscribersList(): EventWatcher[] {
    const list = [...this.#all];
    for (const set of this.#byQueue.values()) list.push(...set);
    for (const set of this.#byJob.values()) list.push(...set);
    return list;
  }
}

/** Resolves after the I/O callbacks already waiting have run. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Waits for `promise`, or until `signal` aborts. */
async function untilDone(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      promise,
      new Promise<void>((resolve) => signal.addEventListener("abort", (onAbort = () => resolve()), { once: true })),
    ]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
  }
}

function addTo(index: Map<string, Set<EventWatcher>>, key: string, sub: EventWatcher): void {
  let set = index.get(key);
  if (set === undefined) {
    set = new Set();
    index.set(key, set);
  }
  set.add(sub);
}

function removeFrom(index: Map<string, Set<EventWatcher>>, key: string, sub: EventWatcher): void {
  const set = index.get(key);
  if (set === undefined) return;
  set.delete(sub);
  if (set.size === 0) index.delete(key);
}
