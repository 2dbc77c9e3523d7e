/**
 * The front door runs: every curl line of the README's walkthrough and of
 * docs/tutorial.md is sent, in order, to a fresh server, and each answer is
 * compared with the JSON the page shows under it. Ids, lease tokens, times
 * and durations differ from run to run: the page's are mapped to the run's
 * as they first appear (so a later line that names the job the page's
 * Submit created names the run's), and everything else must be as the page
 * says. A page's `...` stands for fields left out, and a value it cuts short
 * (`01a22c92-...`) for any. The rest of a shell block (npm, comments,
 * `buf curl`) is not a call.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../helpers/process.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

interface Call {
  line: number;
  method: string;
  headers: Record<string, string>;
  body: string;
}

interface Step {
  calls: Call[];
  /** The answers the page shows under the calls, one per call; undefined where it shows none. */
  expected: Array<string | undefined>;
}

/** The fenced blocks of a page with the line each starts on. */
function blocks(markdown: string): Array<{ lang: string; text: string; line: number }> {
  const out: Array<{ lang: string; text: string; line: number }> = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]);
    if (open === null) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
    out.push({ lang: open[1], text: body.join("\n"), line: start + 1 });
  }
  return out;
}

/** The words of a shell command line, with '...' and "..." quoting (what the pages use). */
function words(command: string): string[] {
  const out: string[] = [];
  const re = /'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (const m of command.matchAll(re)) out.push(m[1] ?? m[2]?.replace(/\\(.)/g, "$1") ?? m[3]);
  return out;
}

/** The curl calls of a shell block (not `buf curl`). */
function callsOf(text: string, line: number): Call[] {
  // Lines end a command unless continued with a backslash or inside quotes (a body may span lines).
  const commands: string[] = [];
  let current = "";
  let quote: string | null = null;
  for (const raw of text.split("\n")) {
    const piece: string = quote === null ? raw.replace(/\s+#[^'"]*$/, "") : raw;
    for (const ch of piece as Iterable<string>) if (ch === "'" || ch === '"') quote = quote === null ? ch : quote === ch ? null : quote;
    if (quote !== null) current += `${piece}\n`;
    else if (piece.endsWith("\\")) current += `${piece.slice(0, -1)} `;
    else {
      commands.push((current + piece).trim());
      current = "";
    }
  }
  const calls: Call[] = [];
  for (const command of commands) {
    if (!command.startsWith("curl ")) continue;
    const w = words(command);
    const url = w.find((x) => /^(http:\/\/)?(localhost|127\.0\.0\.1):8080\//.test(x));
    if (url === undefined) continue;
    const headers: Record<string, string> = {};
    let body = "";
    for (let i = 1; i < w.length; i++) {
      if (w[i] === "-H") {
        const [name, ...value] = w[++i].split(":");
        headers[name.trim().toLowerCase()] = value.join(":").trim();
      } else if (w[i] === "-d") body = w[++i];
    }
    calls.push({ line, method: url.replace(/^.*\/leasequeue\.v1\.LeaseQueueService\//, ""), headers, body });
  }
  return calls;
}

/** The JSON values of an output block: one per top-level value, spread over lines. */
function answersOf(text: string): string[] {
  const out: string[] = [];
  let current = "";
  let depth = 0;
  for (const line of text.split("\n")) {
    current += `${line}\n`;
    for (const ch of line.replace(/"(?:[^"\\]|\\.)*"/g, "")) {
      if (ch === "{" || ch === "[") depth++;
      else if (ch === "}" || ch === "]") depth--;
    }
    if (depth === 0 && current.trim() !== "") {
      out.push(current.trim());
      current = "";
    }
  }
  return out;
}

function steps(markdown: string): Step[] {
  const all = blocks(markdown);
  const out: Step[] = [];
  all.forEach((b, i) => {
    if (b.lang !== "sh") return;
    const calls = callsOf(b.text, b.line);
    if (calls.length === 0) return;
    const next = all[i + 1];
    const shown = next?.lang === "json" && next.line <= b.line + b.text.split("\n").length + 2 ? answersOf(next.text) : [];
    out.push({ calls, expected: calls.map((_, k) => (shown.length === calls.length ? shown[k] : undefined)) });
  });
  return out;
}

/** A page's answer as a value, its `...` left out; undefined when it is not JSON even so. */
function shownValue(text: string): unknown {
  const cleaned = text
    .replace(/,\s*"\.\.\.":\s*"\.\.\."/g, "")
    .replace(/,\s*\.\.\.(?=\s*[,}\]])/g, "")
    .replace(/\[\s*\d+ ids\s*\]/g, "[]");
  try {
    return JSON.parse(cleaned);
  } catch {
    return undefined;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TOKEN = /^[A-Za-z0-9_-]{40,}$/;
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const DURATION = /^\d+(\.\d+)?s$/;
/** Fields whose values depend on the run (or the clock), compared by kind only. */
const VOLATILE_KEYS = new Set([
  "sequence",
  "oldestPendingAge",
  "traceparent",
  "tracestate",
  "leaseExpireTime",
  "nextRunTime",
  "lastRunTime",
]);

/**
 * Compares a page's answer with the run's, recording in `names` the run's
 * value for each id and token of the page; answers the differences.
 */
function differences(shown: unknown, actual: unknown, names: Map<string, string>, path = "$"): string[] {
  if (typeof shown === "string" && typeof actual === "string") {
    if (UUID.test(shown) || TOKEN.test(shown)) {
      const known = names.get(shown);
      if (known === undefined) names.set(shown, actual);
      return known === undefined || known === actual ? [] : [`${path}: ${actual}, the page's ${shown} was ${known} before`];
    }
    if ((TIME.test(shown) && TIME.test(actual)) || (DURATION.test(shown) && DURATION.test(actual))) return [];
    // A value the page cuts short ("01a22c92-...") stands for any.
    if (shown.endsWith("...")) return [];
    const substituted = [...names].reduce((s, [from, to]) => s.split(from).join(to), shown);
    return substituted === actual ? [] : [`${path}: ${JSON.stringify(actual)}, the page shows ${JSON.stringify(shown)}`];
  }
  if (Array.isArray(shown)) {
    if (!Array.isArray(actual)) return [`${path}: ${JSON.stringify(actual)}, the page shows a list`];
    if (shown.length > actual.length) return [`${path}: ${actual.length} entries, the page shows ${shown.length}`];
    return shown.flatMap((v, i) => differences(v, actual[i], names, `${path}[${i}]`));
  }
  if (shown !== null && typeof shown === "object") {
    if (actual === null || typeof actual !== "object") return [`${path}: ${JSON.stringify(actual)}, the page shows an object`];
    return Object.entries(shown).flatMap(([k, v]) => {
      if (!(k in actual)) return [`${path}.${k}: missing`];
      if (VOLATILE_KEYS.has(k)) return [];
      return differences(v, (actual as Record<string, unknown>)[k], names, `${path}.${k}`);
    });
  }
  return shown === actual ? [] : [`${path}: ${JSON.stringify(actual)}, the page shows ${JSON.stringify(shown)}`];
}

let server: TestServer;
beforeEach(async () => {
  server = await startTestServer();
});
afterEach(async () => {
  await server.close();
});

describe.each(["README.md", "docs/tutorial.md"])("the curl lines of %s", (page) => {
  it("run against a fresh server and answer as the page shows", async () => {
    const names = new Map<string, string>();
    const problems: string[] = [];
    let sent = 0;
    for (const step of steps(readFileSync(join(PACKAGE_ROOT, page), "utf8"))) {
      for (const [k, call] of step.calls.entries()) {
        const rename = (s: string) => [...names].reduce((t, [from, to]) => t.split(from).join(to), s);
        const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${call.method}`, {
          method: "POST",
          headers: Object.fromEntries(Object.entries(call.headers).map(([h, v]) => [h, rename(v)])),
          body: rename(call.body),
        });
        sent++;
        const text = await res.text();
        const shown = step.expected[k] === undefined ? undefined : shownValue(step.expected[k]);
        const answer = text === "" ? undefined : (JSON.parse(text) as unknown);
        const failed = typeof answer === "object" && answer !== null && "code" in answer;
        if (shown === undefined) {
          if (res.status !== 200 && !failed) problems.push(`${page}:${call.line} ${call.method}: HTTP ${res.status} ${text}`);
          continue;
        }
        for (const d of differences(shown, answer, names)) problems.push(`${page}:${call.line} ${call.method}: ${d}`);
      }
    }
    expect(sent).toBeGreaterThan(2);
    expect(problems).toEqual([]);
  });
});
