/**
 * The tables of docs/api.md that restate the server's own tables say what
 * the code says: the error table is src/service/error-table.ts row for row
 * (as the reference at /docs shows it, scripts/docs/errors.mjs), the
 * bounds table is src/domain/request-bounds.ts as the reference writes it
 * (scripts/docs/bounds.mjs), and the RPC table lists every RPC of leasequeue.v1 with the role of
 * src/service/rpc-roles.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { boundsTableMarkdown, describeBounds } from "../../scripts/docs/bounds.mjs";
import { describeErrors, errorTableMarkdown } from "../../scripts/docs/errors.mjs";
import * as durationText from "../../src/domain/duration-text.js";
import * as requestBounds from "../../src/domain/request-bounds.js";
import { ERROR_TABLE } from "../../src/service/error-table.js";
import { RPC_ROLES } from "../../src/service/rpc-roles.js";
import { cells, tableUnder } from "../helpers/markdown.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

const api = readFileSync(join(PACKAGE_ROOT, "docs/api.md"), "utf8");

/** The bounds table as the code says it, for bounds and defaults (the code's unless given). */
function boundsTable(bounds: object = requestBounds.BOUNDS): string[] {
  return boundsTableMarkdown(describeBounds({ BOUNDS: bounds, DEFAULTS: requestBounds.DEFAULTS }, durationText));
}

describe("docs/api.md's tables", () => {
  it('"Errors" is the server\'s error table, row for row', () => {
    expect(tableUnder(api, "## Errors")).toEqual(errorTableMarkdown(describeErrors(ERROR_TABLE)));
  });

  it('"Bounds" is what the server validates against, row for row', () => {
    expect(tableUnder(api, "## Bounds")).toEqual(boundsTable());
  });

  it('"Bounds" is told apart from the code when one bound differs, in the doc or in the code', () => {
    const edited = api.replace("| maxJobs | 1..100 |", "| maxJobs | 1..99 |");
    expect(edited).not.toBe(api);
    expect(tableUnder(edited, "## Bounds")).not.toEqual(boundsTable());
    expect(tableUnder(api, "## Bounds")).not.toEqual(boundsTable({ ...requestBounds.BOUNDS, maxJobs: [1, 200] }));
  });

  it('"RPCs" lists every RPC of leasequeue.v1 once, with the role a token needs for it', () => {
    const rows = tableUnder(api, "## RPCs")
      .slice(2)
      .map((row) => cells(row));
    expect(rows.map(([rpc]) => rpc).sort()).toEqual(LeaseQueueService.methods.map((m) => m.name).sort());
    for (const [rpc, role] of rows) expect(role, rpc).toBe(RPC_ROLES[rpc]);
  });

  it("reads a table only under its own heading", () => {
    const text = "## A\n\n| x |\n|---|\n| 1 |\n\n## B\n\ntext\n";
    expect(tableUnder(text, "## A")).toEqual(["| x |", "|---|", "| 1 |"]);
    expect(() => tableUnder(text, "## B")).toThrow(/no table under "## B"/);
    expect(() => tableUnder(text, "## C")).toThrow(/no heading "## C"/);
  });
});
