/**
 * The worker SDK (`leasequeue/worker`) must run in a worker process without
 * the server: src/worker imports only packages, gen/, its own files and the
 * domain modules that import nothing but each other (the bounds table
 * src/domain/request-bounds.ts, the nesting bound, the backoff formula), so
 * sharing a rule with the server drags no server code in.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importsOf, selfContainedDomainModules } from "../helpers/imports.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

describe("the worker SDK's imports", () => {
  const dir = join(PACKAGE_ROOT, "src/worker");
  const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  const shared = selfContainedDomainModules();

  it.each(files)("%s imports only packages, gen/, its own folder and self-contained domain modules", (file) => {
    const relative = importsOf(join(dir, file)).filter((s) => s.startsWith("."));
    const outside = relative.filter(
      (s) =>
        !s.startsWith("./") && !s.startsWith("../../gen/") && !(s.startsWith("../domain/") && shared.has(s.slice("../domain/".length))),
    );
    expect(outside).toEqual([]);
  });

  it("domain/request-bounds.ts imports nothing at all", () => {
    expect(importsOf(join(PACKAGE_ROOT, "src/domain/request-bounds.ts"))).toEqual([]);
  });

  it("counts as self-contained only the domain modules that bring nothing else in", () => {
    expect(shared).toContain("request-bounds.js");
    expect(shared).toContain("json-depth.js");
    // ids.ts imports the uuid package; state-machine.ts, through lease-token.ts, node:crypto.
    expect(shared).not.toContain("ids.js");
    expect(shared).not.toContain("state-machine.js");
  });

  it("validation, the state machine and the SDK's checks take their bounds and defaults from it", () => {
    expect(importsOf(join(PACKAGE_ROOT, "src/service/validate.ts"))).toContain("../domain/request-bounds.js");
    expect(importsOf(join(PACKAGE_ROOT, "src/domain/state-machine.ts"))).toContain("./request-bounds.js");
    expect(importsOf(join(PACKAGE_ROOT, "src/worker/worker-options.ts"))).toContain("../domain/request-bounds.js");
    expect(importsOf(join(PACKAGE_ROOT, "src/worker/result-checks.ts"))).toContain("../domain/request-bounds.js");
  });
});
