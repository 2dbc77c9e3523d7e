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
if (report.cpuProfile !== undefined) {
  console.log(
    `\nTop self time, ${report.cpuProfile.scenario}; the server was idle ${((report.cpuProfile.idleShare ?? 0) * 100).toFixed(0)}% of ${report.cpuProfile.totalMs} ms; shares are of its busy time:\n\n| share | function | where |\n|--:|---|---|`,
  );
  for (const e of report.cpuProfile.top) console.log(`| ${(e.share * 100).toFixed(1)}% | \`${e.fn}\` | ${e.where} |`);
}
if (report.cpuProfile?.byArea !== undefined) {
  console.log("\n| share of busy time | area |\n|--:|---|");
  for (const a of report.cpuProfile.byArea) console.log(`| ${(a.share * 100).toFixed(1)}% | ${a.area} |`);
}
for (const w of report.cpuProfile?.workers ?? []) {
  console.log(
    `\nWorker thread ${w.thread} (on SQLite, the store thread): idle ${((w.idleShare ?? 0) * 100).toFixed(0)}% of ${w.totalMs} ms; top self time, shares of its busy time:\n\n| share | function | where |\n|--:|---|---|`,
  );
  for (const e of w.top) console.log(`| ${(e.share * 100).toFixed(1)}% | \`${e.fn}\` | ${e.where} |`);
  if (w.byArea !== undefined) {
    console.log("\n| share of busy time | area |\n|--:|---|");
    for (const a of w.byArea) console.log(`| ${(a.share * 100).toFixed(1)}% | ${a.area} |`);
  }
}
