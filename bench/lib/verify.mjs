/**
 * The bench's correctness check: a run counts only if every job was
 * completed exactly once. Workers report the payload index `i` of each job
 * they completed; together they must hold each of 0..n-1 once.
 */

/** The payload indexes seen by every worker: exactly once each of 0..n-1? */
export function verifyExactlyOnce(arrays, n) {
  const seen = new Uint8Array(n);
  let completions = 0;
  let duplicates = 0;
  let outOfRange = 0;
  for (const a of arrays) {
    for (const i of a) {
      completions++;
      if (!Number.isInteger(i) || i < 0 || i >= n) outOfRange++;
      else if (seen[i] === 1) duplicates++;
      else seen[i] = 1;
    }
  }
  let missing = 0;
  for (let i = 0; i < n; i++) if (seen[i] === 0) missing++;
  const ok = completions === n && duplicates === 0 && missing === 0 && outOfRange === 0;
  return { ok, completions, duplicates, missing, outOfRange };
}
