/**
 * The defaults the docs state are the ones the code applies: the side
 * port's timeouts (docs/api.md "Side port"), the TypeScript worker's
 * shutdown timeout and reconnect backoff (docs/writing-a-worker.md "Options
 * of `createWorker`"), and the server's defaults of config/defaults.ts in
 * the settings table and docs/configuration.md.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SERVER_DEFAULTS } from "../../src/config/defaults.js";
import { SETTINGS } from "../../src/config/settings.js";
import { DEFAULT_HTTP1_TIMEOUTS } from "../../src/server/http1-timeouts.js";
import { http2ServerLimits } from "../../src/server/http2-limits.js";
import { SIDE_PORT_CLOSE_GRACE_MS, SIDE_PORT_TIMEOUTS } from "../../src/server/side-listener.js";
import { DEFAULT_RECONNECT_BACKOFF } from "../../src/worker/backoff.js";
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from "../../src/worker/worker-options.js";
import { cells, tableUnder } from "../helpers/markdown.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

const read = (file: string) => readFileSync(join(PACKAGE_ROOT, file), "utf8");
const seconds = (ms: number) => `${ms / 1000} s`;

describe("the timing defaults the docs state", () => {
  it('docs/api.md "Side port" states the side port\'s timeouts', () => {
    const api = read("docs/api.md");
    const section = api
      .slice(api.indexOf("\n## Side port\n"), api.indexOf("\n## ", api.indexOf("\n## Side port\n") + 1))
      .replace(/\s+/g, " ");
    expect(SIDE_PORT_TIMEOUTS.headersTimeout).toBe(SIDE_PORT_TIMEOUTS.requestTimeout);
    expect(section).toContain(`must arrive whole within ${seconds(SIDE_PORT_TIMEOUTS.requestTimeout)}`);
    expect(section).toContain(`keep-alive connection is closed after ${seconds(SIDE_PORT_TIMEOUTS.keepAliveTimeout)}`);
    expect(section).toContain(`requests in flight get ${seconds(SIDE_PORT_CLOSE_GRACE_MS)} to finish`);
  });

  it("docs/writing-a-worker.md's options table states the worker's shutdown timeout and reconnect backoff", () => {
    const rows = tableUnder(read("docs/writing-a-worker.md"), "### Options of `createWorker`").map((row) => cells(row));
    const defaultOf = (option: string) => rows.find(([name]) => name === `\`${option}\``)?.[1];
    const grouped = (n: number, separator: string) => String(n).replace(/\B(?=(\d{3})+$)/g, separator);
    expect(defaultOf("shutdownTimeout")).toBe(grouped(DEFAULT_SHUTDOWN_TIMEOUT_MS, " "));
    const { initialMs, maxMs } = DEFAULT_RECONNECT_BACKOFF;
    expect(defaultOf("reconnectBackoff")).toBe(`\`{ initialMs: ${grouped(initialMs, "_")}, maxMs: ${grouped(maxMs, "_")} }\``);
  });
});

describe("the server defaults a setting states", () => {
  const rows = tableUnder(read("docs/configuration.md"), "# Configuration").map((row) => cells(row));

  it.each(Object.entries(SERVER_DEFAULTS))("%s: the setting, docs/configuration.md and the code apply %s", (key, value) => {
    const setting = SETTINGS[key as keyof typeof SETTINGS];
    expect(setting.default).toBe(String(value));
    expect(rows.find(([env]) => env === `\`${setting.env}\``)?.[2]).toBe(`\`${value}\``);
  });

  it("the code falls back to them when no setting is passed", () => {
    expect(http2ServerLimits().settings?.maxConcurrentStreams).toBe(SERVER_DEFAULTS.http2MaxConcurrentStreams);
    expect(DEFAULT_HTTP1_TIMEOUTS).toEqual({
      headersTimeout: SERVER_DEFAULTS.requestHeadersTimeoutMs,
      requestTimeout: SERVER_DEFAULTS.requestTimeoutMs,
      keepAliveTimeout: SERVER_DEFAULTS.keepAliveTimeoutMs,
    });
  });
});
