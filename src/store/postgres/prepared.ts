/**
 * Named (prepared) statements: node-postgres sends a statement with a name
 * once per connection and afterwards only binds its values, so PostgreSQL
 * parses and plans it once per connection instead of at every call. Every
 * statement of the store is a fixed text per schema, so the name is a hash of
 * the text: the same text always gets the same name, on every connection, and
 * two texts never share one.
 */
import { createHash } from "node:crypto";
import type pg from "pg";

const names = new Map<string, string>();

function nameOf(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `lq_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/** A query of a fixed statement text, prepared once per connection. */
export function prepared(text: string, values: unknown[] = []): pg.QueryConfig {
  return { name: nameOf(text), text, values };
}

/** The same, with rows as arrays in column order. */
export function preparedArrays(text: string, values: unknown[] = []): pg.QueryArrayConfig {
  return { name: nameOf(text), text, values, rowMode: "array" };
}
