/**
 * The browser pages run without the server: the operations console
 * (src/console) imports only packages, gen/, its own folder and the domain
 * modules that import nothing else (a rule it shares with the server, such
 * as how a duration is written), and the API reference (src/docs) not even
 * gen/ (it reads everything it shows from reference.json, built by
 * scripts/build-docs.mjs).
 */
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { importsOf, selfContainedDomainModules } from "../helpers/imports.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

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

  it.each(consoleFiles.map((f) => relative(PACKAGE_ROOT, f)))(
    "%s imports only packages, gen/, its own folder and self-contained domain modules",
    (file) => {
      const depth = relative(join(PACKAGE_ROOT, "src/console"), join(PACKAGE_ROOT, file)).split("/").length - 1;
      const gen = `${"../".repeat(depth + 2)}gen/`;
      const domain = `${"../".repeat(depth + 1)}domain/`;
      const shared = selfContainedDomainModules();
      const own = depth === 0 ? ["./"] : ["./", "../"];
      const relativeImports = importsOf(join(PACKAGE_ROOT, file)).filter((s) => s.startsWith("."));
      const outside = relativeImports.filter(
        (s) =>
          !s.startsWith(gen) &&
          !(s.startsWith(domain) && shared.has(s.slice(domain.length))) &&
          !(own.some((p) => s.startsWith(p)) && !s.includes("../../")),
      );
      expect(outside).toEqual([]);
    },
  );
});
