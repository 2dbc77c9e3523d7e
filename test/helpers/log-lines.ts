/** A logger for a server in the test's process whose lines (parsed JSON) a test awaits, as spawnServer's waitForLine does for a child's. */
import { createLogger, type Logger, type LogLevel } from "../../src/logger.js";

export interface LogLines {
  /** Pass as StartOptions.log. */
  readonly log: Logger;
  /** Every line so far, parsed. */
  readonly lines: any[];
  /** Resolves with the first line at index `from` or later (default 0) for which `pred` is true, already logged or still to come. */
  readonly waitFor: (pred: (line: any) => boolean, from?: number) => Promise<any>;
}

export function logLines(level: LogLevel = "debug"): LogLines {
  const lines: any[] = [];
  const waiters = new Set<() => void>();
  const log = createLogger({
    level,
    write: (line) => {
      lines.push(JSON.parse(line));
      for (const w of [...waiters]) w();
    },
  });
  return {
    log,
    lines,
    waitFor: (pred, from = 0) =>
      new Promise((resolve) => {
        const check = () => {
          const line = lines.slice(from).find(pred);
          if (line === undefined) return;
          waiters.delete(check);
          resolve(line);
        };
        waiters.add(check);
        check();
      }),
  };
}
