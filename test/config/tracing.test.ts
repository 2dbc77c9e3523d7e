/**
 * Tracing's configuration (docs/operations.md "Tracing"): only the standard
 * OpenTelemetry variables, spans on only with OTEL_TRACES_EXPORTER=otlp.
 */
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/config/config.js";
import { tracingConfig } from "../../src/config/tracing.js";
import { ConfigError } from "../../src/config/values.js";

describe("tracing configuration", () => {
  it("is off unless OTEL_TRACES_EXPORTER is otlp, and off with OTEL_SDK_DISABLED=true", () => {
    expect(tracingConfig({})).toBeUndefined();
    expect(tracingConfig({ OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    expect(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toBeUndefined();
    expect(tracingConfig({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(resolveConfig({}, {}).tracing).toBeUndefined();
  });

  it("exports protobuf over HTTP as leasequeue by default", () => {
    expect(tracingConfig({ OTEL_TRACES_EXPORTER: "otlp" })).toEqual({ protocol: "http/protobuf", serviceName: "leasequeue" });
    expect(resolveConfig({}, { OTEL_TRACES_EXPORTER: "otlp" }).tracing).toEqual({ protocol: "http/protobuf", serviceName: "leasequeue" });
  });

  it("takes the protocol (the traces variant first) and the service name", () => {
    const env = { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_SERVICE_NAME: "queue-eu" };
    expect(tracingConfig(env)).toEqual({ protocol: "http/json", serviceName: "queue-eu" });
    expect(tracingConfig({ ...env, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" })?.protocol).toBe("http/protobuf");
  });

  it("refuses an exporter or a protocol the server does not have, naming the variable", () => {
    expect(() => tracingConfig({ OTEL_TRACES_EXPORTER: "zipkin" })).toThrow(ConfigError);
    expect(() => tracingConfig({ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL/,
    );
    expect(() => tracingConfig({ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL/,
    );
  });
});
