/**
 * A request stream that a test feeds while the call runs, for bidirectional
 * calls (Work): `push` sends a message, and the stream ends when `signal`
 * aborts or `end()` is called. The messages pushed before the call starts
 * are sent first, in order.
 *
 *   const requests = requestQueue<WorkRequest>(done.signal);
 *   requests.push(create(WorkRequestSchema, { start: { queue, workerId } }));
 *   for await (const res of client.work(requests.stream, { signal: done.signal })) requests.push(acksFor(res));
 */
export interface RequestQueue<T> {
  push(message: T): void;
  /** Ends the stream after the messages already pushed. */
  end(): void;
  readonly stream: AsyncIterable<T>;
}

export function requestQueue<T>(signal?: AbortSignal): RequestQueue<T> {
  const pending: T[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  signal?.addEventListener("abort", notify, { once: true });
  async function* stream(): AsyncGenerator<T> {
    for (;;) {
      if (signal?.aborted === true) return;
      const next = pending.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (ended) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  return {
    push(message) {
      pending.push(message);
      notify();
    },
    end() {
      ended = true;
      notify();
    },
    stream: stream(),
  };
}
