/**
 * The reference's error table, from the server's own table
 * (src/service/error-table.ts, compiled into dist/ by the tsc step of the
 * build): each row's Connect code by its wire name, the HTTP status Connect
 * answers it with, and the ErrorInfo reasons its detail names. The same
 * rows as Markdown are what docs/api.md "Errors" shows
 * (test/docs/doc-tables.test.ts).
 */
import { Code } from "@connectrpc/connect";

/** The HTTP status of each code in the Connect protocol (https://connectrpc.com/docs/protocol#error-codes). */
const HTTP_STATUS = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Connect's wire name of a code: Code.InvalidArgument -> "invalid_argument". */
export function codeName(code) {
  const name = Code[code];
  if (typeof name !== "string") throw new Error(`${code} is not a Connect code`);
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

/** @param {ReadonlyArray<{ situation: string, code: number, statusNote?: string, detail: string }>} table ERROR_TABLE */
export function describeErrors(table) {
  if (table.length === 0) throw new Error("the error table has no rows");
  return table.map((row) => {
    const note = row.statusNote === undefined ? "" : `, ${row.statusNote}`;
    return {
      situation: row.situation,
      code: codeName(row.code),
      status: `(${HTTP_STATUS[row.code]}${note})`,
      detail: row.detail,
      reasons: [...row.detail.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]),
    };
  });
}

/** The rows of describeErrors as the lines of a Markdown table, header included. */
export function errorTableMarkdown(errors) {
  return [
    "| situation | code (HTTP for Connect) | detail |",
    "|---|---|---|",
    ...errors.map((e) => `| ${e.situation} | \`${e.code}\` ${e.status} |${e.detail === "" ? "" : ` ${e.detail}`} |`),
  ];
}
