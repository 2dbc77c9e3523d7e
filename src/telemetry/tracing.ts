/**
 * The server's tracing (docs/operations.md "Tracing"): started by app.ts
 * only when the standard variables ask for an exporter (config/tracing.ts).
 * Nothing of OpenTelemetry is imported until then: this module names its
 * types only, and loads the SDK (otel-tracing.ts) on start, so a server
 * without an exporter never loads it and its calls pay one undefined check.
 */
import type { TracingConfig } from "../config/config.js";
import type { Logger } from "../logger.js";
import type { Tracing } from "./tracing-types.js";

export type { Tracing };

export async function startTracing(config: TracingConfig, log: Logger): Promise<Tracing> {
  const { createTracing } = await import("./otel-tracing.js");
  return createTracing(config, log);
}
