/**
 * The server's floors (ARCHITECTURE.md): an import only ever points
 * down. cli.ts -> app.ts and commands/ -> server/ -> service/ -> dispatch/
 * and maintenance/ (side by side, neither importing the other) -> store/ ->
 * domain/, with the leaves metrics/, config.ts (with config/) and logger.ts
 * used from above, and gen/ (the wire types) only from service/ up. Inside store/,
 * each engine keeps to itself: sqlite/ and postgres/ never import each
 * other, and of the shared files only engine.ts opens them. The worker SDK,
 * the console and the API reference page have their own tests
 * (test/worker/layering.test.ts, test/docs/layering.test.ts).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "./helpers/process.js";

/** Each unit's floor: a unit imports only units on lower floors (and its own files). */
const FLOORS: Record<string, number> = {
  "src/cli.ts": 10,
  "src/app.ts": 9,
  "src/commands": 9,
  "src/server": 8,
  "src/service": 7,
  gen: 6.5,
  "src/dispatch": 6,
  "src/maintenance": 6,
  "src/metrics": 5,
  "src/store": 4,
  "src/config": 3,
  "src/logger.ts": 2,
  "src/domain": 1,
};

/** Checked elsewhere: they run beside the server, not on its floors. */
const BESIDE = ["src/worker", "src/console", "src/docs"];

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gms)].map((m) => m[1] ?? m[2]);
}

/** The unit a repository path belongs to: its top folder under src/, or the file itself (one with a folder of its name, such as config.ts and config/, is that folder's). */
function unitOf(path: string): string {
  const parts = path.split("/");
  if (parts[0] === "gen") return "gen";
  if (parts.length > 2) return `${parts[0]}/${parts[1]}`;
  const folder = path.replace(/\.tsx?$/, "");
  return existsSync(join(PACKAGE_ROOT, folder)) ? folder : path;
}

const files = readdirSync(join(PACKAGE_ROOT, "src"), { recursive: true, encoding: "utf8" })
  .filter((f) => /\.tsx?$/.test(f))
  .map((f) => `src/${f}`)
  .filter((f) => !BESIDE.some((dir) => f.startsWith(`${dir}/`)));

/** The repository paths a file imports (relative imports only; packages are not ours). */
function targetsOf(file: string): string[] {
  return importsOf(join(PACKAGE_ROOT, file))
    .filter((s) => s.startsWith("."))
    .map((s) => relative(PACKAGE_ROOT, resolve(PACKAGE_ROOT, dirname(file), s)).replace(/\.js$/, ".ts"));
}

describe("the server's floors", () => {
  it("knows every unit under src/", () => {
    const units = new Set(files.map(unitOf));
    expect([...units].filter((u) => FLOORS[u] === undefined)).toEqual([]);
  });

  it.each(files)("%s imports only its own unit and lower floors", (file) => {
    const unit = unitOf(file);
    const upward = targetsOf(file).filter((target) => {
      const to = unitOf(target);
      return to !== unit && !(FLOORS[to] < FLOORS[unit]);
    });
    expect(upward).toEqual([]);
  });

  it("keeps maintenance/ on dispatch's floor: imported only from above it, importing only store/, domain/ and the logger", () => {
    const importers = files.filter((f) => targetsOf(f).some((t) => unitOf(t) === "src/maintenance")).map(unitOf);
    expect(importers.filter((u) => !(FLOORS[u] > FLOORS["src/maintenance"]))).toEqual([]);
    const imported = new Set(files.filter((f) => unitOf(f) === "src/maintenance").flatMap((f) => targetsOf(f).map(unitOf)));
    expect([...imported].filter((u) => !["src/maintenance", "src/store", "src/domain", "src/logger.ts"].includes(u))).toEqual([]);
    expect(importers).toContain("src/app.ts");
  });

  it("keeps each engine to itself: only store/engine.ts of the shared files opens one", () => {
    const engineOf = (path: string) => /^src\/store\/(sqlite|postgres)\//.exec(path)?.[1];
    const crossing = files
      .filter((f) => f.startsWith("src/store/"))
      .flatMap((f) => targetsOf(f).map((t) => ({ from: f, to: t })))
      .filter(({ from, to }) => engineOf(to) !== undefined && engineOf(from) !== engineOf(to) && from !== "src/store/engine.ts");
    expect(crossing).toEqual([]);
  });
});
