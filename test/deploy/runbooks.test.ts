/**
 * Every alert of deploy/prometheus/alerts.yaml points at a section of
 * docs/operations.md that says what to do, and the anchor it names exists
 * (GitHub's heading anchors: lower case, punctuation dropped, spaces to "-").
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { ALERTS_FILE } from "../helpers/deploy-expressions.js";

const GUIDE = fileURLToPath(new URL("../../docs/operations.md", import.meta.url));

interface Rule {
  alert?: string;
  annotations?: Record<string, string>;
}

function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    anchors.add(
      m[1]
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-"),
    );
  }
  return anchors;
}

function alerts(): Rule[] {
  const { groups } = parseYaml(readFileSync(ALERTS_FILE, "utf8")) as { groups: { rules: Rule[] }[] };
  return groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
}

describe("alert runbooks", () => {
  it("computes anchors the way GitHub does", () => {
    expect([...headingAnchors("# Alert: LeaseQueueDown\n```\n# not a heading\n```\n## Queue controls, during it")]).toEqual([
      "alert-leasequeuedown",
      "queue-controls-during-it",
    ]);
  });

  it("every alert links to its own section of docs/operations.md, and the section exists", () => {
    const anchors = headingAnchors(readFileSync(GUIDE, "utf8"));
    const rules = alerts();
    expect(rules.length).toBeGreaterThanOrEqual(5);
    for (const rule of rules) {
      const url = rule.annotations?.runbook_url ?? "";
      expect(url, `${rule.alert}: runbook_url`).toBe(`docs/operations.md#alert-${rule.alert!.toLowerCase()}`);
      expect(anchors.has(url.split("#")[1]), `${rule.alert}: ${url} has no heading in docs/operations.md`).toBe(true);
      expect(rule.annotations?.description ?? "", `${rule.alert}: description names the runbook`).toContain(url);
    }
  });
});
