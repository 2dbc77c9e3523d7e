/**
 * Records every better-sqlite3 call made on the calling thread (prepare,
 * exec, pragma, transaction: no statement runs without one of them), for
 * tests that the server's main thread runs no SQL. A store on a worker
 * thread loads its own copy of the module, which these spies do not see.
 */
import Database from "better-sqlite3";
import { vi } from "vitest";

export function recordSqlOnThisThread(): { used: string[]; restore: () => void } {
  const used: string[] = [];
  for (const method of ["prepare", "exec", "pragma", "transaction"] as const) {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the spied object as `this`
    const original = Database.prototype[method] as (...a: unknown[]) => unknown;
    vi.spyOn(Database.prototype, method).mockImplementation(function (this: Database.Database, ...args: unknown[]) {
      used.push(method);
      return original.apply(this, args);
    });
  }
  return { used, restore: () => vi.restoreAllMocks() };
}
