/**
 * What a source file imports, for the layering tests: the worker SDK and the
 * browser pages may share a rule with the server only through a domain
 * module that drags nothing in.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "./process.js";

/** The specifiers a file imports or re-exports, side-effect imports included. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gms)].map((m) => m[1] ?? m[2]);
}

const DOMAIN = join(PACKAGE_ROOT, "src/domain");

/**
 * The files of src/domain that import nothing but other such files (no
 * package, no Node built-in), as `name.js`: importing one brings no server
 * code and nothing Node-only, so the worker SDK and the console may.
 */
export function selfContainedDomainModules(): Set<string> {
  const imports = new Map(
    readdirSync(DOMAIN)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => [f.replace(/\.ts$/, ".js"), importsOf(join(DOMAIN, f))] as const),
  );
  const contained = new Set<string>();
  for (let grew = true; grew;) {
    grew = false;
    for (const [file, specifiers] of imports) {
      if (contained.has(file)) continue;
      if (specifiers.every((s) => s.startsWith("./") && contained.has(s.slice(2)))) {
        contained.add(file);
        grew = true;
      }
    }
  }
  return contained;
}
