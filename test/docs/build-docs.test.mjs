// The pieces of scripts/build-docs.mjs that can go wrong quietly: a
// descriptor set built without source info (no comments) must stop the
// build, not ship a reference without them, and the server's error table
// (src/service/error-table.ts) must come out with Connect's names and HTTP
// statuses. (The built reference itself: reference.test.ts.)
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { describeApi } from "../../scripts/docs/describe-api.mjs";
import { describeErrors, errorTableMarkdown } from "../../scripts/docs/errors.mjs";

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

  it("turns the server's error table into the reference's rows: code by name, Connect's HTTP status, reasons", () => {
    const table = [
      { situation: "unknown job id", code: Code.NotFound, detail: "`ErrorInfo` `JOB_NOT_FOUND`" },
      { situation: "too late", code: Code.DeadlineExceeded, statusNote: "HTTP/1.1: 408", detail: "" },
    ];
    const errors = describeErrors(table);
    expect(errors).toEqual([
      {
        situation: "unknown job id",
        code: "not_found",
        status: "(404)",
        detail: "`ErrorInfo` `JOB_NOT_FOUND`",
        reasons: ["JOB_NOT_FOUND"],
      },
      { situation: "too late", code: "deadline_exceeded", status: "(504, HTTP/1.1: 408)", detail: "", reasons: [] },
    ]);
    expect(errorTableMarkdown(errors)).toEqual([
      "| situation | code (HTTP for Connect) | detail |",
      "|---|---|---|",
      "| unknown job id | `not_found` (404) | `ErrorInfo` `JOB_NOT_FOUND` |",
      "| too late | `deadline_exceeded` (504, HTTP/1.1: 408) | |",
    ]);
    expect(() => describeErrors([])).toThrow(/no rows/);
    expect(() => describeErrors([{ situation: "x", code: 99, detail: "" }])).toThrow(/99 is not a Connect code/);
  });
});
