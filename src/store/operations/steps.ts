/**
 * How the shared write operations wait for a port that may answer at once
 * (SQLite: better-sqlite3 is synchronous) or later (PostgreSQL) without
 * paying for a promise when it answers at once. An operation is a chain of
 * steps, `andThen(port.x(...), (x) => ...)`, where async code would write
 * `const x = await port.x(...)`: the chain runs synchronously for as long as
 * every answer is a plain value, and becomes a promise at the first answer
 * that is one. (Async functions or generators for the operations would cost
 * SQLite's group commit a promise per step, and more CPU per operation.)
 *
 * So a SQLite transaction runs from BEGIN to COMMIT without giving the
 * event loop away (its group commit insists: settledNow), and a
 * PostgreSQL transaction awaits its driver at each step.
 */
import type { Awaitable } from "../transaction-port.js";

export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === "function";
}

/** Continues with `next` once `value` is there: at once for a value, once it settles for a promise. */
export function andThen<T, U>(value: Awaitable<T>, next: (value: T) => Awaitable<U>): Awaitable<U> {
  return isPromiseLike(value) ? value.then(next) : next(value);
}

/** The result of an operation run by an engine whose port answers at once; an error if it waited after all. */
export function settledNow<T>(result: Awaitable<T>): T {
  if (isPromiseLike(result)) throw new Error("invariant: a write operation waited, but this engine's port answers at once");
  return result;
}

/**
 * `run()`, then `next` with its value, or `failed` with what it threw or
 * rejected with (a step's try/catch): at once when `run` answers at once.
 * A failure of `next` itself is not `failed`'s to handle.
 */
export function attempt<T, U>(
  run: () => Awaitable<T>,
  next: (value: T) => Awaitable<U>,
  failed: (error: unknown) => Awaitable<U>,
): Awaitable<U> {
  let value: Awaitable<T>;
  try {
    value = run();
  } catch (error) {
    return failed(error);
  }
  return isPromiseLike(value) ? Promise.resolve(value).then(next, failed) : next(value);
}

/** Runs `step` again for as long as it answers true: a loop of steps, at once for as long as every answer is a plain value. */
export function repeatWhile(step: () => Awaitable<boolean>): Awaitable<void> {
  for (;;) {
    const more = step();
    if (isPromiseLike(more)) return Promise.resolve(more).then((again) => (again ? repeatWhile(step) : undefined));
    if (!more) return;
  }
}

/** `step` for each item in turn, each after the one before has settled. */
export function forEachInTurn<T>(items: readonly T[], step: (item: T) => Awaitable<void>): Awaitable<void> {
  let i = 0;
  return repeatWhile(() => (i >= items.length ? false : andThen(step(items[i++]), () => true)));
}

/**
 * Starts every step at once and settles when all have: for steps that do not
 * depend on each other (PostgreSQL sends their statements together).
 */
export function allAtOnce(steps: ReadonlyArray<Awaitable<void>>): Awaitable<void> {
  return andThen(valuesAtOnce(...steps), () => undefined);
}

/**
 * The values of steps started at once, in their order: a plain array when
 * every one answered at once, else a promise of it (PostgreSQL sends their
 * statements together, in this order).
 */
export function valuesAtOnce<T extends unknown[]>(...steps: { [K in keyof T]: Awaitable<T[K]> }): Awaitable<T> {
  if (!steps.some((step) => isPromiseLike(step))) return steps as unknown as T;
  return Promise.all(steps);
}
