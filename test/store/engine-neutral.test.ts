/**
 * What keeps a second engine an adapter, not a copy: store code outside
 * an engine's folder is engine-neutral (it imports nothing of SQLite), and
 * the server and the command line reach a database only through
 * store/engine.ts (the commands that are SQLite-only by nature, backup,
 * check, restore and import-litequeue, are the exceptions).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../helpers/process.js";

function importsOf(file: string): string[] {
  const text = readFileSync(join(PACKAGE_ROOT, file), "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]);
}

const sqliteImports = (file: string) => importsOf(file).filter((s) => s === "better-sqlite3" || s.includes("sqlite/"));

describe("engine-neutral store code", () => {
  const neutral = [
    ...readdirSync(join(PACKAGE_ROOT, "src/store"))
      .filter((f) => f.endsWith(".ts"))
      .map((f) => `src/store/${f}`),
    ...readdirSync(join(PACKAGE_ROOT, "src/store/operations")).map((f) => `src/store/operations/${f}`),
  ].filter((f) => f !== "src/store/engine.ts");

  it.each(neutral)("%s imports nothing of SQLite", (file) => {
    expect(sqliteImports(file)).toEqual([]);
  });

  it.each(["src/app.ts", "src/cli.ts", "src/commands/prune.ts"])("%s opens databases only through store/engine.ts", (file) => {
    expect(sqliteImports(file)).toEqual([]);
    expect(importsOf(file).some((s) => s.endsWith("store/engine.js"))).toBe(true);
  });
});
