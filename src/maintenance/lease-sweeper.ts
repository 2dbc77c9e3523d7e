/**
 * The background half of lease recovery (the other half runs inside every
 * Claim): every `intervalMs` it moves jobs whose lease expired back to RETRY
 * or to DEAD, so a crashed worker's jobs come back even when nobody claims.
 */
import type { Logger } from "../logger.js";
import type { Store } from "../store/store.js";

export interface LeaseSweeperOptions {
  store: Store;
  log: Logger;
  /** Default 500 ms: docs/api.md "Lease recovery" promises a sweep twice a second. */
  intervalMs?: number;
}

export function startLeaseSweeper({ store, log, intervalMs = 500 }: LeaseSweeperOptions): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  // Sweeps that failed in a row: an outage (a full disk, a lost database
  // file) is logged once when it starts and once when it ends, not twice a second.
  let failed = 0;
  const sweep = async () => {
    try {
      const recovered = await store.recoverExpiredLeases();
      if (failed > 0) log.info("lease sweeps work again", { failedSweeps: failed });
      failed = 0;
      if (recovered > 0) log.info("recovered expired leases", { count: recovered });
    } catch (err) {
      if (failed++ === 0) log.warn("lease sweep failed; retrying quietly until one works", { error: err });
    }
  };
  const timer = setInterval(() => {
    running ??= sweep().finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
