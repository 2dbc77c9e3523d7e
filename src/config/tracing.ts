/**
 * Tracing (docs/operations.md "Tracing") is configured only by the standard
 * OpenTelemetry variables, never by a LEASEQUEUE_ setting: spans are on when
 * `OTEL_TRACES_EXPORTER=otlp`. This reads the few the server decides on; the
 * SDK reads the rest itself (OTEL_EXPORTER_OTLP_ENDPOINT and its _TRACES_
 * variant, headers, timeout, compression, OTEL_BSP_*, OTEL_TRACES_SAMPLER,
 * OTEL_RESOURCE_ATTRIBUTES).
 */
import { ConfigError } from "./values.js";

/** The OTLP encodings the server exports with: protobuf over HTTP, or JSON over HTTP. */
export type OtlpProtocol = "http/protobuf" | "http/json";

export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL; default http/protobuf. */
  protocol: OtlpProtocol;
  /** OTEL_SERVICE_NAME; default "leasequeue" (OTEL_RESOURCE_ATTRIBUTES may add more). */
  serviceName: string;
}

const PROTOCOLS: readonly OtlpProtocol[] = ["http/protobuf", "http/json"];

/**
 * The tracing the environment asks for: undefined (no spans, the SDK never
 * loaded) unless OTEL_TRACES_EXPORTER is `otlp` and OTEL_SDK_DISABLED is not
 * `true`. Throws ConfigError for an exporter or protocol the server does not
 * have.
 */
export function tracingConfig(env: NodeJS.ProcessEnv): TracingConfig | undefined {
  const value = (name: string) => env[name]?.trim() ?? "";
  if (value("OTEL_SDK_DISABLED").toLowerCase() === "true") return undefined;
  const exporter = value("OTEL_TRACES_EXPORTER");
  if (exporter === "" || exporter === "none") return undefined;
  if (exporter !== "otlp") throw new ConfigError(`OTEL_TRACES_EXPORTER must be otlp or none (got ${JSON.stringify(exporter)})`);
  const protocolName =
    value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") !== "" ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = value(protocolName) === "" ? "http/protobuf" : value(protocolName);
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new ConfigError(`${protocolName} must be http/protobuf or http/json (got ${JSON.stringify(protocol)})`);
  }
  return { protocol: protocol as OtlpProtocol, serviceName: value("OTEL_SERVICE_NAME") || "leasequeue" };
}
