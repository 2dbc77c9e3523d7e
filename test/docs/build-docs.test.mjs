// The pieces of scripts/build-docs.mjs that can go wrong quietly: a
// descriptor set built without source info (no comments) and a README whose
// error table moved or changed shape must stop the build, not ship a
// reference without them. (The built reference itself: reference.test.ts.)
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { describeApi } from "../../scripts/docs/describe-api.mjs";
import { describeErrors } from "../../scripts/docs/errors.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const buf = join(dirname(createRequire(import.meta.url).resolve("@bufbuild/buf/package.json")), "bin/buf");
const build = (...flags) =>
  execFileSync(process.execPath, [buf, "build", "--as-file-descriptor-set", ...flags, "-o", "-#format=binpb"], {
    cwd: root,
    maxBuffer: 64 << 20,
  });
const options = { services: ["leasequeue.v1.LeaseQueueService"], extraMessages: [], roleOf: () => undefined };

describe("build-docs", () => {
  it("reads the comments of a descriptor set built with source info, and refuses one without", () => {
    const reference = describeApi(build(), options);
    expect(reference.services[0].methods[0].comment).toMatch(/^Submit creates a job/);
    expect(() => describeApi(build("--exclude-source-info"), options)).toThrow(/no source code info/);
  });

  it("refuses a service the descriptor set does not have", () => {
    expect(() => describeApi(build(), { ...options, services: ["leasequeue.v1.NoSuchService"] })).toThrow(
      /no service leasequeue.v1.NoSuchService/,
    );
  });

  it("reads README's error table, and refuses a README without it or with a malformed row", () => {
    const readme = [
      "# X",
      "### Errors",
      "",
      "Text.",
      "",
      "| situation | code | detail |",
      "|---|---|---|",
      "| unknown job id | `not_found` (404) | `ErrorInfo` `JOB_NOT_FOUND` |",
      "| busy | `unavailable` (503) | |",
      "",
      "## Next",
    ].join("\n");
    expect(describeErrors(readme)).toEqual([
      {
        situation: "unknown job id",
        code: "not_found",
        status: "(404)",
        detail: "`ErrorInfo` `JOB_NOT_FOUND`",
        reasons: ["JOB_NOT_FOUND"],
      },
      { situation: "busy", code: "unavailable", status: "(503)", detail: "", reasons: [] },
    ]);
    expect(() => describeErrors("# X\n## Errors\n")).toThrow(/no "### Errors" section/);
    expect(() => describeErrors("### Errors\n\n## Next\n| a | b | c |\n")).toThrow(/has no table/);
    expect(() => describeErrors("### Errors\n| a | b | c |\n|-|-|-|\n| x | 404 | y |\n")).toThrow(/does not start with a `code`/);
    expect(() => describeErrors("### Errors\n| a | b |\n|-|-|\n| x | `not_found` |\n")).toThrow(/expected 3 cells/);
  });
});
