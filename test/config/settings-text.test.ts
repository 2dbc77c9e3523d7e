/**
 * The settings table written out: docs/configuration.md (`npm run
 * docs:config`) and the rows of --help, each with every setting.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SETTINGS } from "../../src/config/config.js";
import { CONFIGURATION_DOC_NOTICE, configurationDoc, settingsHelpRows } from "../../src/config/settings-text.js";

describe("configuration", () => {
  it("documents every setting in docs/configuration.md, written from the settings table (`npm run docs:config`)", () => {
    const page = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");
    expect(page.split("\n", 1)[0]).toBe(CONFIGURATION_DOC_NOTICE);
    expect(page).toBe(configurationDoc());
    for (const s of Object.values(SETTINGS)) expect(page).toContain(`| \`${s.env}\` | \`--${s.flag}\` |`);
  });

  it("prints every setting in --help with its values and default from the table", () => {
    const rows = settingsHelpRows();
    expect(rows).toHaveLength(Object.keys(SETTINGS).length);
    expect(rows.find((r) => r.includes("--database-pool-size"))).toMatch(
      /LEASEQUEUE_DATABASE_POOL_SIZE +most PostgreSQL .*\(1-1000; default 10\)$/,
    );
    expect(rows.find((r) => r.includes("--metrics-host"))).toMatch(/\(a host name or IP address; default: same as host\)$/);
  });
});
