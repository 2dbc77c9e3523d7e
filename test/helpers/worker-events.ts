/** Records a worker's events and lets a test await them instead of sleeping. */
import type { WorkerEvent } from "../../src/worker/index.js";

type EventOf<T extends WorkerEvent["type"]> = Extract<WorkerEvent, { type: T }>;

export interface WorkerEventLog {
  /** Pass as the worker's `onEvent`. */
  readonly onEvent: (event: WorkerEvent) => void;
  readonly events: WorkerEvent[];
  /** Events of one type seen so far. */
  all<T extends WorkerEvent["type"]>(type: T): EventOf<T>[];
  /** Resolves once `count` events of `type` (matching `where`) have been seen, counting those already seen. */
  waitFor<T extends WorkerEvent["type"]>(type: T, count?: number, where?: (e: EventOf<T>) => boolean): Promise<EventOf<T>[]>;
}

export function workerEventLog(): WorkerEventLog {
  const events: WorkerEvent[] = [];
  const waiters = new Set<() => void>();
  const log: WorkerEventLog = {
    events,
    onEvent(event) {
      events.push(event);
      for (const check of [...waiters]) check();
    },
    all<T extends WorkerEvent["type"]>(type: T) {
      return events.filter((e): e is EventOf<T> => e.type === type);
    },
    waitFor(type, count = 1, where = () => true) {
      return new Promise((resolve) => {
        const check = () => {
          const seen = log.all(type).filter(where);
          if (seen.length < count) return;
          waiters.delete(check);
          resolve(seen);
        };
        waiters.add(check);
        check();
      });
    },
  };
  return log;
}

/** A promise with its resolve function outside, to hold a handler until the test lets it go. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}
