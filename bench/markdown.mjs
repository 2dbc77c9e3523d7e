#!/usr/bin/env node
// Prints a saved bench result (bench/results/*.json) as the Markdown tables
// of docs/performance.md:  node bench/markdown.mjs bench/results/<file>.json
import { readFileSync } from "node:fs";
import { markdownReport } from "./lib/report.mjs";

const file = process.argv[2];
if (file === undefined) {
  process.stderr.write("usage: node bench/markdown.mjs <bench/results/file.json>\n");
  process.exit(2);
}
const report = JSON.parse(readFileSync(file, "utf8"));
console.log(markdownReport(report));
/** One thread's profile summary as Markdown: its top self time, then its areas. */
function profileTables(title, summary) {
  console.log(
    `\n${title}; idle ${((summary.idleShare ?? 0) * 100).toFixed(0)}% of ${summary.totalMs} ms; shares are of its busy time:\n\n| share | function | where |\n|--:|---|---|`,
  );
  for (const e of summary.top) console.log(`| ${(e.share * 100).toFixed(1)}% | \`${e.fn}\` | ${e.where} |`);
  if (summary.byArea !== undefined) {
    console.log("\n| share of busy time | area |\n|--:|---|");
    for (const a of summary.byArea) console.log(`| ${(a.share * 100).toFixed(1)}% | ${a.area} |`);
  }
}

if (report.cpuProfile !== undefined) {
  profileTables(`Top self time, ${report.cpuProfile.scenario}: the server's main thread`, report.cpuProfile);
  for (const w of report.cpuProfile.workers ?? []) profileTables(`Worker thread ${w.thread}`, w);
}
