import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { startLeaseSweeper } from "../../src/maintenance/lease-sweeper.js";
import type { Store } from "../../src/store/store.js";

describe("the lease sweeper", () => {
  it("logs an outage once when it starts and once when it ends, however many sweeps fail meanwhile", async () => {
    const lines: any[] = [];
    let worksAgain!: () => void;
    const recovered = new Promise<void>((resolve) => (worksAgain = resolve));
    const log = createLogger({
      write: (line) => {
        const json = JSON.parse(line);
        lines.push(json);
        if (json.msg === "recovered expired leases") worksAgain();
      },
    });
    let calls = 0;
    const store = {
      recoverExpiredLeases: () => (++calls <= 5 ? Promise.reject(new Error("disk full")) : Promise.resolve(2)),
    } as unknown as Store;
    const sweeper = startLeaseSweeper({ store, log, intervalMs: 1 });
    await recovered;
    await sweeper.stop();
    expect(lines.slice(0, 3).map((l) => [l.level, l.msg])).toEqual([
      ["warn", "lease sweep failed; retrying quietly until one works"],
      ["info", "lease sweeps work again"],
      ["info", "recovered expired leases"],
    ]);
    expect(lines[0].error.message).toBe("disk full");
    expect(lines[1].failedSweeps).toBe(5);
  });
});
