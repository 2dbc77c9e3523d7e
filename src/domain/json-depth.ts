/**
 * The nesting bound of a payload, result or progress (docs/api.md
 * "Bounds"; why 32: BOUNDS.jsonDepth): how deep a value nests, and the
 * words every refusal of one nested deeper uses, whoever refuses it
 * (validation, lease delivery, the worker SDK, PostgreSQL's submit(), the
 * litequeue import).
 */
import { BOUNDS } from "./request-bounds.js";

/**
 * How deeply a value nests, as the bound counts it (`1` is 0, `[1]` and `{}`
 * are 1), or `limit + 1` as soon as it is known to be deeper than `limit`.
 * `childrenOf` gives a container's members, undefined for a scalar. Walks
 * with an explicit stack, never recursion, so a value nested far past the
 * bound costs one pass and no call stack.
 */
export function nestingDepth<T>(value: T, childrenOf: (value: T) => readonly T[] | undefined, limit: number = BOUNDS.jsonDepth): number {
  let deepest = 0;
  const pending: Array<[T, number]> = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [v, depth] = next;
    const children = childrenOf(v);
    if (children === undefined) continue;
    const level = depth + 1;
    if (level > limit) return limit + 1;
    if (level > deepest) deepest = level;
    for (const child of children) pending.push([child, level]);
  }
  return deepest;
}

/** nestingDepth of plain JSON (as JSON.parse returns it). */
export function jsonDepth(value: unknown, limit: number = BOUNDS.jsonDepth): number {
  return nestingDepth(value, plainChildren, limit);
}

function plainChildren(value: unknown): readonly unknown[] | undefined {
  return value !== null && typeof value === "object" ? Object.values(value) : undefined;
}

/**
 * The end of every refusal of a value nested too deeply, after the field and
 * "is": `nested more than 32 levels deep; the limit is 32 levels`. `limit`
 * is the bound as text; PostgreSQL's json_text() passes an SQL expression
 * spliced into its literal.
 */
export function nestedTooDeepText(limit: number | string = BOUNDS.jsonDepth): string {
  return `nested more than ${limit} levels deep; the limit is ${limit} levels`;
}
