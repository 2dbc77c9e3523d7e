/**
 * The settings table in words: the rows of `leasequeue --help`, and
 * docs/configuration.md (written by scripts/build-configuration-doc.mjs;
 * test/config/settings-text.test.ts fails when the file differs from what
 * this writes).
 */
import { SETTINGS, type Setting } from "./settings.js";

/** What `--help` says after a setting's line: the values it takes and its default (or what unset means). */
function helpValues(s: Setting): string {
  const parts = [s.value.accepts, s.default !== "" ? `default ${s.default}` : s.unset === undefined ? undefined : `default: ${s.unset}`];
  const said = parts.filter((p) => p !== undefined);
  return said.length === 0 ? "" : ` (${said.join("; ")})`;
}

/** One line per setting: flag, variable, what it does, the values it takes, its default. */
export function settingsHelpRows(): string[] {
  const settings: Setting[] = Object.values(SETTINGS);
  const flagWidth = Math.max(...settings.map((s) => s.flag.length));
  const envWidth = Math.max(...settings.map((s) => s.env.length));
  return settings.map((s) => `  --${s.flag.padEnd(flagWidth)} ${s.env.padEnd(envWidth)} ${s.help}${helpValues(s)}`);
}

/** Where docs/configuration.md says it comes from. */
export const CONFIGURATION_DOC_NOTICE =
  "<!-- Generated from the settings table in src/config/settings.ts by scripts/build-configuration-doc.mjs (npm run docs:config); do not edit. -->";

/** A table cell: pipes escaped, so a value cannot end its cell. */
function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

function code(text: string): string {
  return `\`${text}\``;
}

/** docs/configuration.md: the settings table as Markdown. */
export function configurationDoc(): string {
  const rows = (Object.values(SETTINGS) as Setting[]).map((s) => {
    const byDefault = s.default !== "" ? code(s.default) : `unset: ${s.unset ?? "none"}`;
    const accepts = s.value.accepts ?? "";
    const meaning = s.details === undefined ? s.help : `${s.help}. ${s.details}`;
    return `| ${code(s.env)} | ${code(`--${s.flag}`)} | ${cell(byDefault)} | ${cell(accepts)} | ${cell(meaning)} |`;
  });
  return `${CONFIGURATION_DOC_NOTICE}
# Configuration

Every setting is an environment variable and a flag of \`leasequeue serve\`;
a flag wins over the variable, which wins over the default, and an empty
variable counts as unset. \`npx leasequeue --help\` prints the same table. A
value out of bounds stops the server before it opens anything, with a
message that names the flag or variable (exit code 2). The commands, logs
and signals are in [Operations](operations.md#commands).

| variable | flag | default | values | what it does |
|---|---|---|---|---|
${rows.join("\n")}
`;
}
