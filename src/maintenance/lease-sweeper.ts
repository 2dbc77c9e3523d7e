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
  const sweep = async () => {
    try {
      const recovered = await store.recoverExpiredLeases();
      if (recovered > 0) log.info("recovered expired leases", { count: recovered });
    } catch (err) {
      log.warn("lease sweep failed; will retry", { error: err });
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
