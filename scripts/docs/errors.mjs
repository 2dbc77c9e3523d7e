/**
 * The reference's error table: the table under README's "### Errors"
 * heading, so that the page and the README say the same thing (a test holds
 * both to the codes and ErrorInfo reasons the server really sends).
 */

/** Cells of a markdown table row `| a | b | c |`. */
function cells(row) {
  return row
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((cell) => cell.trim());
}

/** @param {string} readme the text of README.md */
export function describeErrors(readme) {
  const lines = readme.split("\n");
  const heading = lines.findIndex((line) => line.trim() === "### Errors");
  if (heading === -1) throw new Error('README.md has no "### Errors" section');
  const start = lines.findIndex((line, i) => i > heading && line.startsWith("|"));
  if (start === -1 || lines.slice(heading + 1, start).some((line) => line.startsWith("#"))) {
    throw new Error('README.md\'s "### Errors" section has no table');
  }
  const rows = [];
  for (let i = start + 2; i < lines.length && lines[i].startsWith("|"); i++) rows.push(cells(lines[i]));

  return rows.map((row, i) => {
    if (row.length !== 3) throw new Error(`README.md's error table, row ${i + 1}: expected 3 cells, got ${row.length}`);
    const [situation, codeCell, detail] = row;
    const code = /^`([a-z_]+)`\s*(.*)$/.exec(codeCell);
    if (code === null) throw new Error(`README.md's error table, row ${i + 1}: the code cell does not start with a \`code\`: ${codeCell}`);
    const reasons = [...detail.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]);
    return { situation, code: code[1], status: code[2], detail, reasons };
  });
}
