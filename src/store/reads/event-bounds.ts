/**
 * Where a WatchEvents replay can start (Store.eventBounds), from three
 * figures every engine reads in one snapshot: the smallest stored sequence
 * (0 when none is stored), the highest sequence ever issued, and the
 * highest sequence pruning deleted (0: none). Pruning leaves holes (events
 * of jobs still alive can be older than pruned ones), so the unbroken
 * history starts one past the highest pruned sequence, or at the smallest
 * stored one if that is larger.
 */
export function replayBounds(figures: { oldestStored: number; latestIssued: number; prunedThrough: number }): {
  oldest: number;
  latest: number;
} {
  const { oldestStored, latestIssued, prunedThrough } = figures;
  return { oldest: oldestStored === 0 ? 0 : Math.max(oldestStored, prunedThrough + 1), latest: latestIssued };
}
