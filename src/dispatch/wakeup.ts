/**
 * The wait of a server stream between messages: the stream's generator waits
 * for a wake-up (new work, an event, closing) with its keepalive interval as
 * the timeout; producers call wake(). One waiter at a time.
 */
export class Wakeup {
  #wake: (() => void) | undefined;

  wake(): void {
    this.#wake?.();
  }

  /** Resolves true when woken, false after `ms` or on abort. */
  wait(ms: number, signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.#wake = undefined;
        resolve(woken);
      };
      const onAbort = () => finish(false);
      const timer = setTimeout(() => finish(false), ms);
      signal.addEventListener("abort", onAbort, { once: true });
      this.#wake = () => finish(true);
    });
  }
}
