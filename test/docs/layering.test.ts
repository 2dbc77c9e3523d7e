/**
 * The browser pages run without the server: the operations console
 * (src/console) and the API reference (src/docs) import only packages, gen/
 * and their own folder, and the reference page not even gen/ (it reads
 * everything it shows from reference.json, built by scripts/build-docs.mjs).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../helpers/process.js";

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gms)].map((m) => m[1] ?? m[2]);
}

function sourcesIn(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => /\.tsx?$/.test(f))
    .map((f) => join(dir, f));
}

describe("the browser pages' imports", () => {
  const docs = sourcesIn(join(PACKAGE_ROOT, "src/docs"));
  const consoleFiles = sourcesIn(join(PACKAGE_ROOT, "src/console"));

  it.each(docs.map((f) => relative(PACKAGE_ROOT, f)))("%s imports only preact and its own folder", (file) => {
    const imports = importsOf(join(PACKAGE_ROOT, file));
    expect(imports.filter((s) => !s.startsWith("./") && s !== "preact" && !s.startsWith("preact/"))).toEqual([]);
  });

  it.each(consoleFiles.map((f) => relative(PACKAGE_ROOT, f)))("%s imports only packages, gen/ and its own folder", (file) => {
    const depth = relative(join(PACKAGE_ROOT, "src/console"), join(PACKAGE_ROOT, file)).split("/").length - 1;
    const gen = `${"../".repeat(depth + 2)}gen/`;
    const own = depth === 0 ? ["./"] : ["./", "../"];
    const relativeImports = importsOf(join(PACKAGE_ROOT, file)).filter((s) => s.startsWith("."));
    const outside = relativeImports.filter((s) => !s.startsWith(gen) && !(own.some((p) => s.startsWith(p)) && !s.includes("../../")));
    expect(outside).toEqual([]);
  });
});
