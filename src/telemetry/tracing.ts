/**
 * The server's tracing (docs/operations.md "Tracing"): started by app.ts
 * only when the standard variables ask for an exporter (config/tracing.ts).
 * Nothing of OpenTelemetry is imported until then: this module names its
 * types only, and loads the SDK (otel-tracing.ts) on start, so a server
 * without an exporter never loads it and its calls pay one undefined check.
 */
import type { TracingConfig } from "../config/config.js";
import type { ProducerSpans } from "../domain/producer-spans.js";
import type { Logger } from "../logger.js";
import type { CallSpans } from "../server/call-spans.js";

export interface Tracing {
  /** The SERVER span of each RPC, for the API port's adapter. */
  readonly calls: CallSpans;
  /** The PRODUCER span of each submitted job, for the service and the scheduler. */
  readonly producers: ProducerSpans;
  /**
   * Exports the spans still buffered, then stops the exporter; rejects when
   * that takes more than `timeoutMs` (the spans left are dropped).
   */
  shutdown(timeoutMs: number): Promise<void>;
}

export async function startTracing(config: TracingConfig, log: Logger): Promise<Tracing> {
  const { createTracing } = await import("./otel-tracing.js");
  return createTracing(config, log);
}
