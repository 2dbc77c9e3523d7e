/**
 * SQL functions that turn a jsonb payload into the JSON text the server
 * itself would store and fingerprint, so that a job submitted with
 * `<schema>.submit(...)` is the same as one submitted over the API.
 */
import { nestedTooDeepText } from "../../domain/json-depth.js";
import { quoteEscapeLiteral, quoteIdentifier, quoteLiteral } from "./identifiers.js";

/**
 * Exact bounds of the numbers a double holds, as numeric literals: from half
 * way between the largest double and 2^1024 on, a number rounds to infinity;
 * at or below half the smallest subnormal (2^-1075) a non-zero one rounds
 * to 0. PostgreSQL refuses both conversions, so they are refused first,
 * naming the field.
 */
const OVERFLOW_FROM = (2n ** 1024n - 2n ** 970n).toString();
const UNDERFLOW_TO = `${(5n ** 1075n).toString()}e-1075`;

/**
 * Significant digits a decimal may have and still be the shortest text of
 * the double nearest it (DBL_DIG): up to 15 digits, distinct decimals give
 * distinct doubles, so no shorter text reads back as the same double.
 */
const EXACT_DIGITS = 15;

/**
 * In jsonb's text, a string (kept whole, so nothing inside one is touched),
 * or the blank after a `,` or `:` between values (dropped).
 */
const SEPARATOR_BLANKS = quoteEscapeLiteral(String.raw`("(?:[^"\\]|\\.)*")|(,) |(:) `);
/** A key holding a character from U+E000 on, anywhere in the value (the characters themselves, not escapes). */
const UTF16_KEYS = quoteLiteral(`strict $.** ? (@.type() == "object").keyvalue() ? (@.key like_regex "[\uE000-\u{10FFFF}]")`);
const KEEP_GROUPS = quoteEscapeLiteral(String.raw`\1\2\3`);

/**
 * The functions' SQL. They call each other by schema-qualified names, so they
 * work whatever search_path the caller has, without a SET clause (which
 * would cost a settings change on every call of the recursion).
 *
 * - `json_text(j, sort_keys, field, max_depth)`: compact JSON with numbers
 *   written as JavaScript writes them (`JSON.stringify`), refusing values
 *   nested deeper than docs/api.md "Bounds" allows. With sort_keys false it
 *   is the payload text stored in `jobs.payload`; with sort_keys true, object
 *   keys sorted by UTF-16 code units like `Array.prototype.sort`, it is the
 *   canonical form of domain/submission.ts's submitFingerprint.
 * - `json_number_text(n)`: a number as JavaScript's Number::toString writes
 *   the nearest double (shortest round-trip digits).
 * - `utf16_sort_key(t)`: the UTF-16 code units of a text, as integers, for
 *   ordering keys the way JavaScript compares strings.
 *
 * Every function body writes a backslash only inside E'' literals, so it
 * means the same whatever standard_conforming_strings a session has.
 */
export function jsonFunctionsSql(schema: string): string {
  const s = quoteIdentifier(schema);
  return `
CREATE OR REPLACE FUNCTION utf16_sort_key(t text) RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT coalesce(array_agg(u.unit ORDER BY c.ord, u.part), '{}')
  FROM unnest(string_to_array(t, NULL)) WITH ORDINALITY AS c(ch, ord)
  CROSS JOIN LATERAL (SELECT ascii(c.ch) AS cp) p
  CROSS JOIN LATERAL (VALUES
    (1, CASE WHEN p.cp < 65536 THEN p.cp ELSE 55296 + ((p.cp - 65536) >> 10) END),
    (2, CASE WHEN p.cp >= 65536 THEN 56320 + ((p.cp - 65536) & 1023) END)
  ) AS u(part, unit)
  WHERE u.unit IS NOT NULL
$fn$;

-- JavaScript's Number::toString of the double nearest n: the fewest digits
-- that read back as that double (of two, the nearer), then its notation.
CREATE OR REPLACE FUNCTION json_number_text(n numeric, field text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
  f float8;
  m text[];
  digits text;
  -- The value is 0.<digits> * 10^point (JavaScript's n; k is the digit count).
  point integer;
  k integer;
  lower_digits text;
  upper_digits text;
  upper_point integer;
  lower_ok boolean;
  upper_ok boolean;
  body text;
BEGIN
  IF abs(n) >= ${OVERFLOW_FROM} OR (n <> 0 AND abs(n) <= ${UNDERFLOW_TO}) THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = field,
      MESSAGE = field || ': holds the number ' || left(n::text, 40) || ', which a double (the JSON number of every client) cannot hold';
  END IF;
  IF n = 0 THEN
    RETURN '0';
  END IF;
  -- numeric's text is exact and plain (no exponent).
  m := regexp_match(abs(n)::text, '^([0-9]+)(?:[.]([0-9]+))?$');
  digits := m[1] || coalesce(m[2], '');
  point := length(m[1]);
  k := length(digits) - length(ltrim(digits, '0'));
  digits := rtrim(ltrim(digits, '0'), '0');
  point := point - k;
  IF length(digits) > ${EXACT_DIGITS} THEN
    -- More digits than a double keeps: start from PostgreSQL's shortest
    -- round-trip text of the double (at most 17 digits), and drop a digit
    -- while one fewer still reads back as the same double (PostgreSQL keeps
    -- one more than JavaScript when the shorter text is an exact tie).
    f := abs(n)::float8;
    m := regexp_match(${s}.to_char_shortest(f), '^([0-9]+)(?:[.]([0-9]+))?(?:e([-+][0-9]+))?$');
    digits := m[1] || coalesce(m[2], '');
    point := length(m[1]) + coalesce(m[3]::integer, 0);
    k := length(digits) - length(ltrim(digits, '0'));
    digits := rtrim(ltrim(digits, '0'), '0');
    point := point - k;
    LOOP
      EXIT WHEN length(digits) <= 1;
      -- The two texts of one digit fewer around it (99 rounds up to 100, one place up).
      lower_digits := left(digits, length(digits) - 1);
      upper_digits := (lower_digits::numeric + 1)::text;
      upper_point := point + length(upper_digits) - length(lower_digits);
      lower_ok := ${s}.reads_back_as('0.' || lower_digits || 'e' || point, f);
      upper_ok := ${s}.reads_back_as('0.' || upper_digits || 'e' || upper_point, f);
      IF lower_ok AND (NOT upper_ok OR right(digits, 1)::integer < 5) THEN
        digits := rtrim(lower_digits, '0');
      ELSIF upper_ok THEN
        digits := rtrim(upper_digits, '0');
        point := upper_point;
      ELSE
        EXIT;
      END IF;
    END LOOP;
  END IF;
  k := length(digits);
  IF k <= point AND point <= 21 THEN
    body := digits || repeat('0', point - k);
  ELSIF 0 < point AND point <= 21 THEN
    body := substr(digits, 1, point) || '.' || substr(digits, point + 1);
  ELSIF -6 < point AND point <= 0 THEN
    body := '0.' || repeat('0', -point) || digits;
  ELSE
    body := substr(digits, 1, 1) || CASE WHEN k > 1 THEN '.' || substr(digits, 2) ELSE '' END
      || 'e' || CASE WHEN point - 1 >= 0 THEN '+' ELSE '-' END || abs(point - 1)::text;
  END IF;
  RETURN CASE WHEN n < 0 THEN '-' ELSE '' END || body;
END
$fn$;

-- Whether a decimal text reads back as the double f (false where it would overflow or underflow).
CREATE OR REPLACE FUNCTION reads_back_as(t text, f float8) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT CASE WHEN t::numeric >= ${OVERFLOW_FROM} OR t::numeric <= ${UNDERFLOW_TO} THEN false ELSE t::float8 = f END
$fn$;

-- A double's shortest round-trip text, whatever extra_float_digits the session has.
CREATE OR REPLACE FUNCTION to_char_shortest(f float8) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET extra_float_digits = 1
AS $fn$ SELECT f::text $fn$;

-- Whether numeric text is already what JavaScript writes for that number:
-- at most 15 significant digits, no trailing fraction zeros, no exponent
-- needed (JavaScript writes 1e21 and 1e-7 with one). A cheap test; numbers
-- that fail it are rewritten by json_number_text.
CREATE OR REPLACE FUNCTION json_number_is_canonical(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT t ~ '^-?(0|[1-9][0-9]{0,14})$'
    OR (t ~ '^-?[1-9][0-9]*[.][0-9]*[1-9]$' AND length(t) - CASE WHEN left(t, 1) = '-' THEN 2 ELSE 1 END <= ${EXACT_DIGITS})
    OR t ~ '^-?0[.]0{0,5}[1-9]([0-9]{0,13}[1-9])?$'
$fn$;

-- The compact text of j by walking it, for what json_text's fast path cannot
-- do: keys sorted as JavaScript sorts them, numbers to rewrite. One
-- statement, whatever the nesting: every value becomes a token (its
-- separator, key, and scalar or opening bracket) at the path of its ranks
-- among its siblings, every container a closing token after its children,
-- and the tokens in path order are the text.
-- utf16_order: some key holds a character from U+E000 on (see json_text).
CREATE OR REPLACE FUNCTION json_text_walk(j jsonb, sort_keys boolean, utf16_order boolean, field text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  WITH RECURSIVE node(path, key, value) AS (
    SELECT ARRAY[1], NULL::text, j
    UNION ALL
    SELECT n.path || c.rank, c.key, c.value
    FROM node n
    CROSS JOIN LATERAL (
      SELECT e.key, e.value, row_number() OVER (
          ORDER BY CASE WHEN utf16_order THEN ${s}.utf16_sort_key(e.key) END,
            CASE WHEN sort_keys THEN e.key COLLATE "C" END, e.ord)::integer AS rank
        FROM jsonb_each(CASE WHEN jsonb_typeof(n.value) = 'object' THEN n.value ELSE '{}' END) WITH ORDINALITY AS e(key, value, ord)
      UNION ALL
      SELECT NULL, e.value, e.ord::integer
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.value) = 'array' THEN n.value ELSE '[]' END) WITH ORDINALITY AS e(value, ord)
    ) c
  ), token(path, text) AS (
    SELECT path,
      CASE WHEN path[array_length(path, 1)] > 1 THEN ',' ELSE '' END
      || CASE WHEN key IS NOT NULL THEN to_json(key)::text || ':' ELSE '' END
      || CASE jsonb_typeof(value)
           WHEN 'object' THEN '{'
           WHEN 'array' THEN '['
           WHEN 'number' THEN CASE WHEN ${s}.json_number_is_canonical(value #>> '{}') THEN value #>> '{}'
             ELSE ${s}.json_number_text((value #>> '{}')::numeric, field) END
           ELSE value::text END
    FROM node
    UNION ALL
    SELECT path || 2147483647, CASE jsonb_typeof(value) WHEN 'object' THEN '}' ELSE ']' END
    FROM node WHERE jsonb_typeof(value) IN ('object', 'array')
  )
  SELECT string_agg(text, '' ORDER BY path) FROM token
$fn$;

-- The compact JSON text of j (see the top of json-functions.ts), refusing
-- a value nested deeper than max_depth: one with a container at level
-- max_depth or deeper (the top value is level 0).
CREATE OR REPLACE FUNCTION json_text(j jsonb, sort_keys boolean, field text, max_depth integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
  IF jsonb_path_exists(j, ('strict $.**{' || max_depth || ' to last} ? (@.type() == "object" || @.type() == "array")')::jsonpath) THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = field,
      MESSAGE = field || ': is ${nestedTooDeepText("' || max_depth || '")}';
  END IF;
  -- Fast path: jsonb's own text less the blank after each separator (found
  -- outside strings), when every number in it is written as JavaScript would.
  IF NOT sort_keys AND coalesce((
      SELECT bool_and(${s}.json_number_is_canonical(n #>> '{}'))
      FROM jsonb_path_query(j, 'strict $.** ? (@.type() == "number")') AS n), true) THEN
    RETURN regexp_replace(j::text, ${SEPARATOR_BLANKS}, ${KEEP_GROUPS}, 'g');
  END IF;
  -- JavaScript compares keys by UTF-16 code units; UTF-8 bytes (COLLATE "C")
  -- order them the same unless a key holds a character from U+E000 on.
  RETURN ${s}.json_text_walk(j, sort_keys,
    sort_keys AND jsonb_path_exists(j, ${UTF16_KEYS}::jsonpath), field);
END
$fn$;
`;
}
