/**
 * The functions of the PostgreSQL schema: generated from code (the bounds of
 * domain/request-bounds.ts, the schema's channel), so they are not numbered
 * migrations. migrate.ts creates or replaces them after the migrations,
 * under the same lock, when the database holds an older revision of them
 * (or the same revision with other text, as on a developer's database).
 *
 * Bump DEFINITIONS_REVISION whenever their text changes (a bound in
 * request-bounds.ts, a function body): a server of an older release starting
 * beside a newer one then leaves the newer functions alone, instead of the
 * two replacing each other's at every start. test/store/postgres pins the
 * text's hash to the revision, so a change without a bump fails there.
 */
import { createHash } from "node:crypto";
import { countCompactionSql } from "./job-counts.js";
import { jsonFunctionsSql } from "./json-functions.js";
import { sequencerFunctionSql } from "./event-sequencer.js";
import { activityCompactionSql } from "./queue-activity-sql.js";
import { submitFunctionSql } from "./submit-function.js";

export const DEFINITIONS_REVISION = 5;

/** Every function, in dependency order; run with search_path set to the schema. */
export function definitionsSql(schema: string): string {
  return [
    jsonFunctionsSql(schema),
    submitFunctionSql(schema),
    sequencerFunctionSql(schema),
    countCompactionSql(schema),
    activityCompactionSql(schema),
  ].join("\n");
}

/** SHA-256 (hex) of the definitions' text for a schema. */
export function definitionsHash(schema: string): string {
  return createHash("sha256").update(definitionsSql(schema)).digest("hex");
}
