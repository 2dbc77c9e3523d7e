/**
 * SQL functions that turn a jsonb payload into the JSON text the server
 * itself would store and fingerprint, so that a job submitted with
 * `<schema>.submit(...)` is the same as one submitted over the API:
 *
 * - `json_text(j, sort_keys, field, max_depth)`: compact JSON with numbers
 *   written as JavaScript writes them (`JSON.stringify`), refusing values
 *   nested deeper than api.md allows. With sort_keys false it is the payload
 *   text stored in `jobs.payload`; with sort_keys true, object keys sorted by
 *   UTF-16 code units like `Array.prototype.sort`, it is the canonical form of
 *   domain/submission.ts's submitFingerprint.
 * - `json_number_text(n)`: a number as JavaScript's Number::toString writes
 *   the nearest double (shortest round-trip digits).
 * - `utf16_sort_key(t)`: the UTF-16 code units of a text, as integers, for
 *   ordering keys the way JavaScript compares strings.
 *
 * Every function body avoids backslashes, so it means the same whatever
 * standard_conforming_strings a session has.
 */
import { quoteIdentifier } from "./identifiers.js";

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
 * The functions' SQL. They call each other by schema-qualified names, so they
 * work whatever search_path the caller has, without a SET clause (which
 * would cost a settings change on every call of the recursion).
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

-- A container at nesting level L (the top value is level 0) is refused when
-- L >= max_depth: then a value inside it would be deeper than max_depth.
CREATE OR REPLACE FUNCTION json_text(j jsonb, sort_keys boolean, field text, max_depth integer, level integer DEFAULT 0) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
  kind text := jsonb_typeof(j);
BEGIN
  IF kind = 'object' OR kind = 'array' THEN
    IF level >= max_depth THEN
      RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = field,
        MESSAGE = field || ': is nested more than ' || max_depth || ' levels deep; the limit is ' || max_depth || ' levels';
    END IF;
    IF kind = 'object' THEN
      RETURN '{' || coalesce((
        SELECT string_agg(to_json(e.key)::text || ':' || ${s}.json_text(e.value, sort_keys, field, max_depth, level + 1), ','
          ORDER BY CASE WHEN sort_keys THEN ${s}.utf16_sort_key(e.key) END, e.ord)
        FROM jsonb_each(j) WITH ORDINALITY AS e(key, value, ord)), '') || '}';
    END IF;
    RETURN '[' || coalesce((
      SELECT string_agg(${s}.json_text(e.value, sort_keys, field, max_depth, level + 1), ',' ORDER BY e.ord)
      FROM jsonb_array_elements(j) WITH ORDINALITY AS e(value, ord)), '') || ']';
  ELSIF kind = 'string' THEN
    RETURN to_json(j #>> '{}')::text;
  ELSIF kind = 'number' THEN
    RETURN ${s}.json_number_text((j #>> '{}')::numeric, field);
  END IF;
  -- boolean or null
  RETURN j::text;
END
$fn$;
`;
}
