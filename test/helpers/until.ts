/**
 * How a test waits (docs/development.md "How a test waits"): on the event it
 * means whenever the code gives one (a promise, a message on a stream, a log
 * line, a listener), and with `until` for a state it can only look at (a
 * metric, a row, a count): `until` looks again and again, each look after
 * the event loop has had a turn, and fails naming what it waited for once a
 * deadline far beyond any machine's pace has passed. Never sleep for a time
 * and then assert.
 */

export interface UntilOptions {
  /** The bound on the wait, not an expectation of its length. Default 30 s. */
  timeoutMs?: number;
  /** Between two looks. Default 5 ms. */
  pollMs?: number;
}

/**
 * Resolves with the first value of `check` that is neither `undefined` nor
 * `false` (a condition, or the thing waited for); rejects naming `what`
 * (and the last value seen) once `timeoutMs` passed. An error thrown by
 * `check` ends the wait at once.
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  options: UntilOptions = {},
): Promise<Exclude<T, false | undefined>> {
  const { timeoutMs = 30_000, pollMs = 5 } = options;
  const deadline = performance.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await check();
    if (last !== undefined && last !== false) return last as Exclude<T, false | undefined>;
    if (performance.now() > deadline) {
      throw new Error(`waited ${timeoutMs} ms for ${what}; last seen: ${JSON.stringify(last)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
