/**
 * Names and literals spliced into PostgreSQL statements that cannot take
 * them as parameters (a schema in DDL, a channel in LISTEN, a literal inside
 * a function body). Values always travel as bound parameters; only these
 * names are spliced, and always through these functions.
 */

/** `"name"`, with any `"` doubled: safe for any name (config.ts also restricts the schema to plain identifiers). */
export function quoteIdentifier(name: string): string {
  if (name === "" || name.includes("\0")) throw new Error(`not a PostgreSQL identifier: ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

/** `'text'`, with any `'` doubled; backslashes stay literal under standard_conforming_strings (always on since 9.1). */
export function quoteLiteral(text: string): string {
  if (text.includes("\0")) throw new Error("a PostgreSQL literal cannot hold NUL");
  return `'${text.replaceAll("'", "''")}'`;
}

/** `E'text'`: a literal whose backslashes mean the same whatever standard_conforming_strings says (regular expressions). */
export function quoteEscapeLiteral(text: string): string {
  if (text.includes("\0")) throw new Error("a PostgreSQL literal cannot hold NUL");
  return `E'${text.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`;
}

/**
 * The SQL expression of the advisory-lock key for one purpose in one schema
 * (a bigint hashed from both), so that two schemas in one database never
 * wait for each other, and nothing else that hashes its own names collides
 * with ours except by chance.
 */
export function advisoryLockKey(schema: string, purpose: string): string {
  return `hashtextextended(${quoteLiteral(`leasequeue:${schema}:${purpose}`)}, 0)`;
}
