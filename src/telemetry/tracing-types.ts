/** What the server's tracing hands the rest of the server (tracing.ts starts it, otel-tracing.ts makes it). */
import type { ProducerSpans } from "../domain/producer-spans.js";
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
