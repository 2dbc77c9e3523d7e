/**
 * The metric names a PromQL expression reads, found by a small tokenizer
 * rather than a regular expression over the text, so that function and
 * aggregation names (`rate`, `sum`), keywords (`by`, `without`, `on`,
 * `ignoring`, `group_left`, `bool`, `offset`, `and`, ...), label names (inside
 * `{...}` and in `by (...)` lists), label values and durations are never taken
 * for metrics.
 *
 * What it does not understand it refuses (throws) instead of guessing: a
 * character outside PromQL's alphabet (such as an unsubstituted Grafana `$var`),
 * an unterminated string or bracket, or a `__name__` regex matcher.
 */

type Token =
  | { kind: "ident"; text: string }
  | { kind: "string"; text: string }
  | { kind: "number"; text: string }
  | { kind: "punct"; text: string }
  /** A range or subquery selector, `[5m]` or `[1h:1m]`, kept whole. */
  | { kind: "range"; text: string };

/** Keywords followed by a parenthesised list of label names (optional after group_left / group_right). */
const LABEL_LIST_KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);
/** Binary operators and modifiers spelled as words. */
const WORD_OPERATORS = new Set(["and", "or", "unless", "bool", "offset", "atan2"]);
/** Aggregation operators: their modifier may come before the parenthesis (`sum by (queue) (x)`). */
const AGGREGATIONS = new Set([
  "sum",
  "avg",
  "count",
  "min",
  "max",
  "group",
  "stddev",
  "stdvar",
  "topk",
  "bottomk",
  "quantile",
  "count_values",
  "limitk",
  "limit_ratio",
]);
/** Number literals spelled as words. */
const WORD_NUMBERS = new Set(["inf", "nan"]);
const PUNCTUATION = "(){},+-*/%^=!<>~@";

function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === "#") {
      while (i < expr.length && expr[i] !== "\n") i++;
    } else if (c === '"' || c === "'" || c === "`") {
      const end = stringEnd(expr, i);
      tokens.push({ kind: "string", text: expr.slice(i + 1, end) });
      i = end + 1;
    } else if (c === "[") {
      const end = expr.indexOf("]", i);
      if (end < 0) throw new Error(`unterminated range selector at ${i} in: ${expr}`);
      const range = expr.slice(i, end + 1);
      if (!/^\[\s*[0-9a-zA-Z_.]+\s*(:\s*[0-9a-zA-Z_.]*\s*)?\]$/.test(range)) {
        throw new Error(`unexpected range selector ${range} at ${i} in: ${expr}`);
      }
      tokens.push({ kind: "range", text: range });
      i = end + 1;
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(expr[i + 1] ?? ""))) {
      // Numbers, hex numbers and durations: 0.99, 1e3, 0x1f, 5m, 1h30m.
      const m = /^[0-9a-zA-Z_.]+/.exec(expr.slice(i))!;
      tokens.push({ kind: "number", text: m[0] });
      i += m[0].length;
    } else if (/[a-zA-Z_:]/.test(c)) {
      const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(expr.slice(i))!;
      tokens.push({ kind: "ident", text: m[0] });
      i += m[0].length;
    } else if (PUNCTUATION.includes(c)) {
      tokens.push({ kind: "punct", text: c });
      i++;
    } else {
      throw new Error(`unexpected character ${JSON.stringify(c)} at ${i} in: ${expr}`);
    }
  }
  return tokens;
}

/** Index of the quote that closes the string opening at `start` (backslash escapes, except in backticks). */
function stringEnd(expr: string, start: number): number {
  const quote = expr[start];
  for (let i = start + 1; i < expr.length; i++) {
    if (expr[i] === "\\" && quote !== "`") i++;
    else if (expr[i] === quote) return i;
  }
  throw new Error(`unterminated string at ${start} in: ${expr}`);
}

/** Index just past the `)` closing the `(` at `open`. */
function skipParenthesised(tokens: Token[], open: number): number {
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    const t = tokens[i];
    if (t.kind !== "punct") continue;
    if (t.text === "(") depth++;
    if (t.text === ")" && --depth === 0) return i + 1;
  }
  throw new Error("unbalanced parentheses");
}

function requireBalancedParentheses(tokens: Token[], expr: string): void {
  let depth = 0;
  for (const t of tokens) {
    if (isPunct(t, "(")) depth++;
    if (isPunct(t, ")") && --depth < 0) break;
  }
  if (depth !== 0) throw new Error(`unbalanced parentheses in: ${expr}`);
}

const isPunct = (t: Token | undefined, text: string) => t?.kind === "punct" && t.text === text;

/**
 * Reads the label matchers of `{...}` starting at `open`; returns the index
 * past `}` and the metric name a matcher `__name__="..."` (or a quoted name)
 * gives, if any.
 */
function readMatchers(tokens: Token[], open: number): { next: number; names: string[] } {
  const names: string[] = [];
  let i = open + 1;
  // Each element: `label op "value"`, or a quoted metric name alone; commas between.
  while (!isPunct(tokens[i], "}")) {
    const label = tokens[i];
    if (label === undefined) throw new Error("unterminated label matchers");
    if (isPunct(label, ",")) {
      i++;
      continue;
    }
    if (label.kind !== "ident" && label.kind !== "string") throw new Error(`unexpected ${label.text} in label matchers`);
    let op = "";
    let j = i + 1;
    while (tokens[j]?.kind === "punct" && "=!~".includes(tokens[j].text)) op += tokens[j++].text;
    if (op === "") {
      if (label.kind !== "string") throw new Error(`label ${label.text} without a matcher`);
      names.push(label.text); // {"metric.name"}: a quoted metric name
      i = j;
      continue;
    }
    const value = tokens[j];
    if (value?.kind !== "string") throw new Error(`label ${label.text} without a quoted value`);
    if (label.text === "__name__") {
      if (op !== "=") throw new Error(`cannot check a __name__ matcher other than "=": ${op}`);
      names.push(value.text);
    }
    i = j + 1;
  }
  return { next: i + 1, names };
}

/** Every metric name `expr` reads, once each, in order of appearance. */
export function metricNamesIn(expr: string): string[] {
  const tokens = tokenize(expr);
  requireBalancedParentheses(tokens, expr);
  const names: string[] = [];
  let i = 0;
  while (i < tokens.length) {
    const t = tokens[i];
    if (isPunct(t, "{")) {
      const { next, names: fromMatchers } = readMatchers(tokens, i);
      names.push(...fromMatchers);
      i = next;
      continue;
    }
    if (t.kind !== "ident") {
      i++;
      continue;
    }
    const word = t.text.toLowerCase();
    const followedByParen = isPunct(tokens[i + 1], "(");
    const next = tokens[i + 1];
    const modifierFollows = next?.kind === "ident" && ["by", "without"].includes(next.text.toLowerCase());
    if (LABEL_LIST_KEYWORDS.has(word)) {
      i = followedByParen ? skipParenthesised(tokens, i + 1) : i + 1;
    } else if (WORD_OPERATORS.has(word) || WORD_NUMBERS.has(word) || followedByParen) {
      i++; // an operator, a number, or a function / aggregation name
    } else if (AGGREGATIONS.has(word) && modifierFollows) {
      i++; // `sum by (...) (...)`
    } else {
      names.push(t.text);
      i++;
    }
  }
  return [...new Set(names)];
}

export interface NamedExpression {
  /** Where the expression comes from, for messages: "alerts.yaml: LeaseQueueDown". */
  where: string;
  expr: string;
}

/** The (expression, metric) pairs whose metric is not in `known`. */
export function unknownMetricNames(
  expressions: readonly NamedExpression[],
  known: ReadonlySet<string>,
): { where: string; metric: string }[] {
  return expressions.flatMap(({ where, expr }) =>
    metricNamesIn(expr)
      .filter((metric) => !known.has(metric))
      .map((metric) => ({ where, metric })),
  );
}
