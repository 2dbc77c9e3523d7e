/**
 * The worker SDK (`leasequeue/worker`) must run in a worker process without
 * the server: src/worker imports only packages, gen/, its own files and the
 * limits table src/domain/request-bounds.ts, and that table imports nothing, so
 * sharing it drags no server code in.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../helpers/process.js";

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]);
}

describe("the worker SDK's imports", () => {
  const dir = join(PACKAGE_ROOT, "src/worker");
  const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));

  it.each(files)("%s imports only packages, gen/, its own folder and domain/request-bounds.ts", (file) => {
    const relative = importsOf(join(dir, file)).filter((s) => s.startsWith("."));
    const outside = relative.filter((s) => !s.startsWith("./") && !s.startsWith("../../gen/") && s !== "../domain/request-bounds.js");
    expect(outside).toEqual([]);
  });

  it("domain/request-bounds.ts imports nothing at all", () => {
    expect(importsOf(join(PACKAGE_ROOT, "src/domain/request-bounds.ts"))).toEqual([]);
  });

  it("validation and the state machine take their bounds and defaults from it", () => {
    expect(importsOf(join(PACKAGE_ROOT, "src/service/validate.ts"))).toContain("../domain/request-bounds.js");
    expect(importsOf(join(PACKAGE_ROOT, "src/domain/state-machine.ts"))).toContain("./request-bounds.js");
    expect(importsOf(join(PACKAGE_ROOT, "src/worker/worker.ts"))).toContain("../domain/request-bounds.js");
  });
});
