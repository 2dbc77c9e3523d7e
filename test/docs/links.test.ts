/**
 * Every relative link of the documentation resolves: the file or folder it
 * names exists, and its #anchor is a heading of the target file as GitHub
 * anchors it (test/helpers/markdown.ts). The pages are README.md,
 * ARCHITECTURE.md, SECURITY.md, docs/*.md and the README of every example
 * and client folder.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { anchors, brokenLinks, headings, links, slug } from "../helpers/markdown.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

/** The READMEs one or more levels under `dir` (examples/python-worker/README.md, ...). */
function readmesUnder(dir: string): string[] {
  if (!existsSync(join(PACKAGE_ROOT, dir))) return [];
  return readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.split("/").at(-1) === "README.md")
    .map((f) => join(dir, f));
}

const PAGES = [
  "README.md",
  "ARCHITECTURE.md",
  "SECURITY.md",
  ...readdirSync(join(PACKAGE_ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
  ...readmesUnder("examples"),
  ...readmesUnder("clients"),
];

describe("the documentation's links", () => {
  it("covers the pages it should", () => {
    for (const page of ["README.md", "docs/api.md", "docs/operations.md", "examples/go-worker/README.md"]) expect(PAGES).toContain(page);
  });

  it.each(PAGES)("%s: every relative link and anchor resolves", (page) => {
    expect(brokenLinks(PACKAGE_ROOT, [page])).toEqual([]);
  });

  it.each(PAGES)("%s: no heading repeats another of the same page", (page) => {
    const seen = headings(readFileSync(join(PACKAGE_ROOT, page), "utf8")).map(slug);
    expect(seen.filter((s, i) => seen.indexOf(s) !== i)).toEqual([]);
  });
});

describe("the link checker", () => {
  const dir = mkdtempSync(join(tmpdir(), "lq-links-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "docs"));
  writeFileSync(
    join(dir, "docs/target.md"),
    "# Target\n\n## Queue limits\n\n## The batched path: Acknowledge and `Work`\n\n## Queue limits\n\n```\n## Not a heading\n```\n",
  );
  writeFileSync(join(dir, "image.png"), "");
  writeFileSync(
    join(dir, "README.md"),
    [
      "# Page",
      "",
      "## Quick start",
      "",
      "[ok](docs/target.md) [ok](docs/target.md#queue-limits) [ok](docs/target.md#queue-limits-1)",
      "[ok](docs/target.md#the-batched-path-acknowledge-and-work) [ok](#quick-start) [ok](docs/) ![ok](image.png)",
      "[elsewhere](https://example.com/x.md#nope) `[in code](missing.md)`",
      "[missing file](docs/nope.md) [missing anchor](docs/target.md#queue-limit)",
      "[fenced heading](docs/target.md#not-a-heading) [own anchor](#nowhere) [anchor into a file](image.png#x)",
      "",
      "```",
      "[in a fence](missing.md)",
      "```",
    ].join("\n"),
  );

  it("reports each broken link with its line, and nothing else", () => {
    expect(brokenLinks(dir, ["README.md"])).toEqual([
      "README.md:8: docs/nope.md: docs/nope.md does not exist",
      "README.md:8: docs/target.md#queue-limit: docs/target.md has no heading with the anchor #queue-limit",
      "README.md:9: docs/target.md#not-a-heading: docs/target.md has no heading with the anchor #not-a-heading",
      "README.md:9: #nowhere: README.md has no heading with the anchor #nowhere",
      "README.md:9: image.png#x: an anchor into image.png, which is not a Markdown file",
    ]);
  });

  it("anchors headings as GitHub does: lower case, punctuation dropped, spaces to dashes, repeats numbered", () => {
    expect([...anchors('# API reference at `/docs`\n## WatchEvents: following events\n## A, b\n## A, b\n<a id="x-y"></a>')]).toEqual([
      "api-reference-at-docs",
      "watchevents-following-events",
      "a-b",
      "a-b-1",
      "x-y",
    ]);
  });

  it("finds links outside code only", () => {
    expect(links("[a](x.md) `[b](y.md)` ![c](z.png)\n```\n[d](w.md)\n```\n[e](v.md#h)").map((l) => [l.line, l.target])).toEqual([
      [1, "x.md"],
      [1, "z.png"],
      [5, "v.md#h"],
    ]);
  });
});
