/**
 * Every alert of deploy/prometheus/alerts.yaml points at a section of
 * docs/operations.md that says what to do, and the anchor it names exists
 * (GitHub's heading anchors, test/helpers/markdown.ts).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { ALERTS_FILE } from "../helpers/deploy-expressions.js";
import { anchors } from "../helpers/markdown.js";

const GUIDE = fileURLToPath(new URL("../../docs/operations.md", import.meta.url));

interface Rule {
  alert?: string;
  annotations?: Record<string, string>;
}

function alerts(): Rule[] {
  const { groups } = parseYaml(readFileSync(ALERTS_FILE, "utf8")) as { groups: { rules: Rule[] }[] };
  return groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
}

describe("alert runbooks", () => {
  it("every alert links to its own section of docs/operations.md, and the section exists", () => {
    const headings = anchors(readFileSync(GUIDE, "utf8"));
    const rules = alerts();
    expect(rules.length).toBeGreaterThanOrEqual(5);
    for (const rule of rules) {
      const url = rule.annotations?.runbook_url ?? "";
      expect(url, `${rule.alert}: runbook_url`).toBe(`docs/operations.md#alert-${rule.alert!.toLowerCase()}`);
      expect(headings.has(url.split("#")[1]), `${rule.alert}: ${url} has no heading in docs/operations.md`).toBe(true);
      expect(rule.annotations?.description ?? "", `${rule.alert}: description names the runbook`).toContain(url);
    }
  });
});
