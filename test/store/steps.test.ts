/**
 * The steps of the shared write operations (store/operations/steps.ts): a value
 * chained at once when it is plain, through its promise otherwise.
 */
import { describe, expect, it } from "vitest";
import { allAtOnce, andThen, isPromiseLike, settledNow, valuesAtOnce } from "../../src/store/operations/steps.js";

describe("steps (store/operations/steps.ts)", () => {
  it("chain at once over plain values and through promises otherwise", async () => {
    expect(andThen(2, (x) => andThen(x + 1, (y) => y * 10))).toBe(30);
    const later = andThen(Promise.resolve(2), (x) => andThen(x + 1, (y) => y * 10));
    expect(isPromiseLike(later)).toBe(true);
    expect(await later).toBe(30);
    await expect(andThen(Promise.reject(new Error("no")), () => 1)).rejects.toThrow("no");
  });

  it("start steps together: at once when none waits, settling when all have otherwise, failing with the first failure", async () => {
    expect(allAtOnce([undefined, undefined])).toBeUndefined();
    const order: string[] = [];
    const slow = new Promise<void>((resolve) => setTimeout(() => (order.push("slow"), resolve()), 20));
    const fast = Promise.resolve().then(() => void order.push("fast"));
    const all = allAtOnce([slow, undefined, fast]);
    expect(isPromiseLike(all)).toBe(true);
    await all;
    expect(order).toEqual(["fast", "slow"]);
    await expect(allAtOnce([Promise.reject(new Error("refused")), slow])).rejects.toThrow("refused");
  });

  it("give the values of steps started together, in their order: at once when none waits", async () => {
    const now = valuesAtOnce(1, "two", null);
    expect(isPromiseLike(now)).toBe(false);
    expect(now).toEqual([1, "two", null]);
    let released: (v: string) => void = () => undefined;
    const held = new Promise<string>((resolve) => (released = resolve));
    const later = valuesAtOnce(held, 2, Promise.resolve(true));
    expect(isPromiseLike(later)).toBe(true);
    released("one");
    expect(await later).toEqual(["one", 2, true]);
    await expect(valuesAtOnce(1, Promise.reject(new Error("refused")))).rejects.toThrow("refused");
  });

  it("refuse a result that waited where none may", () => {
    expect(settledNow(5)).toBe(5);
    expect(() => settledNow(Promise.resolve(5))).toThrow(/invariant/);
  });
});
