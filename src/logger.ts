/**
 * Structured logs: one JSON object per line on stdout. Callers pass only
 * what is safe to log; lease tokens, idempotency keys and payloads never go
 * through here.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(options: { level?: LogLevel; write?: (line: string) => void; base?: LogFields } = {}): Logger {
  const min = RANK[options.level ?? "info"];
  const write = options.write ?? ((line: string) => process.stdout.write(line));
  const log =
    (level: LogLevel) =>
    (msg: string, fields: LogFields = {}) => {
      if (RANK[level] < min) return;
      write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...options.base, ...fields }, errorReplacer)}\n`);
    };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}
