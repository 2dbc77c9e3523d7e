/**
 * What the docs tests read out of Markdown: the anchors GitHub gives a
 * file's headings, the relative links a file makes, and the rows of a table
 * under a heading. Fenced code blocks and inline code are never read as
 * Markdown.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

/** The lines of a file that are prose: fenced code blocks blanked (line numbers stay). */
function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split("\n").map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker !== undefined) {
      fence = marker;
      return "";
    }
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return "";
    }
    return line;
  });
}

/** A heading's text as GitHub renders it: inline code, links and emphasis reduced to their text. */
function headingText(raw: string): string {
  return raw
    .replace(/\s+#+\s*$/, "")
    .replace(/`([^`]*)`/g, "$1")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .trim();
}

/** GitHub's anchor of a heading text (github-slugger): lower case, punctuation dropped, spaces to "-". */
export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a link may name in this Markdown: its headings' (repeats get -1, -2, ...) and explicit `<a id>` / `<a name>`. */
export function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*)$/.exec(line);
    if (heading !== null) {
      const base = slug(headingText(heading[1]));
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      found.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(m[1]);
  }
  return found;
}

/** The headings of a file in order, as written (for tests that look for repeats). */
export function headings(markdown: string): string[] {
  return proseLines(markdown)
    .map((line) => /^ {0,3}#{1,6}\s+(.*)$/.exec(line)?.[1])
    .filter((h): h is string => h !== undefined)
    .map(headingText);
}

export interface Link {
  line: number;
  target: string;
}

/** Every inline link and image of the prose (`[text](target)`), inline code excluded. */
export function links(markdown: string): Link[] {
  const found: Link[] = [];
  proseLines(markdown).forEach((line, i) => {
    const prose = line.replace(/(`+)(?:(?!\1).)+?\1/g, "");
    for (const m of prose.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      found.push({ line: i + 1, target: m[1] });
    }
  });
  return found;
}

/**
 * The relative links of the given files (paths from `root`) that do not
 * resolve: the file or folder must exist, and an anchor must be one of the
 * target Markdown file's anchors. Links to other sites are not followed.
 */
export function brokenLinks(root: string, files: readonly string[]): string[] {
  const broken: string[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  const anchorsIn = (path: string) => {
    let known = anchorsOf.get(path);
    if (known === undefined) anchorsOf.set(path, (known = anchors(readFileSync(path, "utf8"))));
    return known;
  };
  for (const file of files) {
    const path = join(root, file);
    for (const { line, target } of links(readFileSync(path, "utf8"))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const hash = target.indexOf("#");
      const pathPart = decodeURI(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const resolved = pathPart === "" ? path : join(dirname(path), pathPart);
      const where = `${file}:${line}: ${target}`;
      if (!existsSync(resolved)) {
        broken.push(`${where}: ${relative(root, resolved)} does not exist`);
        continue;
      }
      if (anchor === undefined) continue;
      if (statSync(resolved).isDirectory() || !resolved.endsWith(".md")) {
        broken.push(`${where}: an anchor into ${relative(root, resolved)}, which is not a Markdown file`);
      } else if (!anchorsIn(resolved).has(anchor)) {
        broken.push(`${where}: ${relative(root, resolved)} has no heading with the anchor #${anchor}`);
      }
    }
  }
  return broken;
}

/** The rows of the first table after `heading` (a line such as "## Errors") and before the next heading, header included. */
export function tableUnder(markdown: string, heading: string): string[] {
  const lines = proseLines(markdown);
  const start = lines.indexOf(heading);
  if (start === -1) throw new Error(`no heading ${JSON.stringify(heading)}`);
  const rows: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#{1,6}\s/.test(line)) break;
    if (line.startsWith("|")) rows.push(line);
    else if (rows.length > 0) break;
  }
  if (rows.length === 0) throw new Error(`no table under ${JSON.stringify(heading)}`);
  return rows;
}

/** The cells of a table row `| a | b |`. */
export function cells(row: string): string[] {
  return row
    .trim()
    .replace(/^\||\|$/g, "")
    .split("|")
    .map((cell) => cell.trim());
}
