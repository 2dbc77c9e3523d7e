/**
 * The OpenTelemetry SDK as the server runs it (docs/operations.md
 * "Tracing"), loaded by tracing.ts only when an exporter is configured: a
 * tracer provider of its own (never registered globally: the server is not
 * an application), spans batched (OTEL_BSP_*) and exported over OTLP/HTTP in
 * protobuf or JSON to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
 * OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces (the exporter reads those
 * itself, with headers, timeout and compression), sampled by
 * OTEL_TRACES_SAMPLER (default parentbased_always_on). The resource names
 * the service (OTEL_SERVICE_NAME, default "leasequeue") and takes
 * OTEL_RESOURCE_ATTRIBUTES. Failed exports are logged as warnings.
 */
import { diag, DiagLogLevel, type DiagLogFunction } from "@opentelemetry/api";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import type { TracingConfig } from "../config/config.js";
import type { Logger } from "../logger.js";
import { createProducerSpans, PresetIdGenerator } from "./producer-spans.js";
import { createRpcServerSpans } from "./rpc-server-spans.js";
import type { Tracing } from "./tracing-types.js";

/** The instrumentation scope of the server's spans. */
const SCOPE = "leasequeue-server";

async function createExporter(protocol: TracingConfig["protocol"]): Promise<SpanExporter> {
  if (protocol === "http/json") {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    return new OTLPTraceExporter();
  }
  const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-proto");
  return new OTLPTraceExporter();
}

function routeDiagnostics(log: Logger): void {
  const warn: DiagLogFunction = (message, ...args) =>
    log.warn("tracing", { message, ...(args.length > 0 ? { details: args.map(String) } : {}) });
  const ignore: DiagLogFunction = () => {};
  diag.setLogger(
    { error: warn, warn, info: ignore, debug: ignore, verbose: ignore },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

export async function createTracing(config: TracingConfig, log: Logger): Promise<Tracing> {
  routeDiagnostics(log);
  const ids = new PresetIdGenerator();
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": config.serviceName }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({
    resource,
    idGenerator: ids,
    spanProcessors: [new BatchSpanProcessor(await createExporter(config.protocol))],
  });
  const tracer = provider.getTracer(SCOPE);
  log.info("tracing on", { protocol: config.protocol, serviceName: resource.attributes["service.name"] });
  return {
    calls: createRpcServerSpans(tracer),
    producers: createProducerSpans(tracer, ids),
    shutdown: (timeoutMs) => withinTime(provider.shutdown(), timeoutMs),
  };
}

/**
 * `done`, or a rejection once `timeoutMs` passed. The exporter's own
 * timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s) and retries are for a server
 * that runs on; at shutdown the spans get only their share of the drain.
 */
function withinTime(done: Promise<void>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the collector did not take the last spans within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([done, late]).finally(() => clearTimeout(timer));
}
