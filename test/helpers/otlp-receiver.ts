/**
 * A local OTLP/HTTP trace receiver for tests: a node:http server on
 * 127.0.0.1 that takes POST /v1/traces in protobuf (application/x-protobuf)
 * or JSON (application/json), answers 200 with an empty
 * ExportTraceServiceResponse, and keeps every span it was sent.
 *
 * The protobuf body is read with @bufbuild/protobuf's wire reader, field by
 * field after opentelemetry-proto's trace.proto (ExportTraceServiceRequest
 * -> ResourceSpans -> ScopeSpans -> Span), for the fields the tests look at.
 */
import { once } from "node:events";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** opentelemetry-proto Span.SpanKind. */
export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  /** The resource's service.name. */
  service: string;
  /** The instrumentation scope's name. */
  scope: string;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, AttributeValue>;
  links: Array<{ traceId: string; spanId: string }>;
  /** Status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
}

export interface OtlpReceiver {
  /** e.g. http://127.0.0.1:4318, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** The content type of every export received, in order. */
  readonly contentTypes: string[];
  /** Resolves once the spans received satisfy `done` (checked at each export). */
  waitFor(done: (spans: ReceivedSpan[]) => boolean): Promise<void>;
  close(): Promise<void>;
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** Reads the message of a length-delimited field whose tag was just read, calling `field` for each of its fields. */
function message(r: BinaryReader, field: (no: number, wireType: WireType, end: number) => void): void {
  const end = r.uint32() + r.pos;
  while (r.pos < end) {
    const [no, wireType] = r.tag();
    const before = r.pos;
    field(no, wireType, end);
    if (r.pos === before) r.skip(wireType);
  }
}

function anyValue(r: BinaryReader): AttributeValue {
  let value: AttributeValue = "";
  message(r, (no) => {
    if (no === 1) value = r.string();
    else if (no === 2) value = r.bool();
    else if (no === 3) value = Number(r.int64());
    else if (no === 4) value = r.double();
  });
  return value;
}

function keyValue(r: BinaryReader, into: Record<string, AttributeValue>): void {
  let key = "";
  let value: AttributeValue = "";
  message(r, (no) => {
    if (no === 1) key = r.string();
    else if (no === 2) value = anyValue(r);
  });
  into[key] = value;
}

function span(r: BinaryReader, service: string, scope: string): ReceivedSpan {
  const s: ReceivedSpan = {
    service,
    scope,
    traceId: "",
    spanId: "",
    parentSpanId: "",
    name: "",
    kind: 0,
    attributes: {},
    links: [],
    status: { code: 0, message: "" },
  };
  message(r, (no) => {
    if (no === 1) s.traceId = hex(r.bytes());
    else if (no === 2) s.spanId = hex(r.bytes());
    else if (no === 4) s.parentSpanId = hex(r.bytes());
    else if (no === 5) s.name = r.string();
    else if (no === 6) s.kind = r.int32();
    else if (no === 9) keyValue(r, s.attributes);
    else if (no === 13) {
      const link = { traceId: "", spanId: "" };
      message(r, (n) => {
        if (n === 1) link.traceId = hex(r.bytes());
        else if (n === 2) link.spanId = hex(r.bytes());
      });
      s.links.push(link);
    } else if (no === 15) {
      message(r, (n) => {
        if (n === 2) s.status.message = r.string();
        else if (n === 3) s.status.code = r.int32();
      });
    }
  });
  return s;
}

/** ExportTraceServiceRequest in protobuf binary. */
export function decodeProtobufExport(body: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  const r = new BinaryReader(body);
  while (r.pos < r.len) {
    const [no, wireType] = r.tag();
    if (no !== 1) {
      r.skip(wireType);
      continue;
    }
    let service = "";
    const scoped: Array<(service: string) => void> = [];
    message(r, (n) => {
      if (n === 1) {
        const attributes: Record<string, AttributeValue> = {};
        message(r, (a) => {
          if (a === 1) keyValue(r, attributes);
        });
        service = String(attributes["service.name"] ?? "");
      } else if (n === 2) {
        let scope = "";
        const raw: Uint8Array[] = [];
        message(r, (k) => {
          if (k === 1) {
            message(r, (f) => {
              if (f === 1) scope = r.string();
            });
          } else if (k === 2) {
            raw.push(r.bytes());
          }
        });
        // Spans are decoded once the resource (which may come later) is known.
        scoped.push((svc) => {
          for (const bytes of raw) {
            const sr = new BinaryReader(lengthPrefixed(bytes));
            out.push(span(sr, svc, scope));
          }
        });
      }
    });
    for (const decode of scoped) decode(service);
  }
  return out;
}

function lengthPrefixed(bytes: Uint8Array): Uint8Array {
  const prefix: number[] = [];
  let v = bytes.length;
  while (v > 0x7f) {
    prefix.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  prefix.push(v);
  return Buffer.concat([Buffer.from(prefix), bytes]);
}

interface JsonKeyValue {
  key: string;
  value: { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    out[key] = value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? ""));
  }
  return out;
}

/** ExportTraceServiceRequest in OTLP/JSON (ids in hex). */
export function decodeJsonExport(body: string): ReceivedSpan[] {
  const request = JSON.parse(body) as { resourceSpans?: any[] };
  return (request.resourceSpans ?? []).flatMap((rs) => {
    const service = String(jsonAttributes(rs.resource?.attributes)["service.name"] ?? "");
    return (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map((s: any): ReceivedSpan => ({
        service,
        scope: ss.scope?.name ?? "",
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? "",
        name: s.name,
        kind: s.kind,
        attributes: jsonAttributes(s.attributes),
        links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
        status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
      })),
    );
  });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const waiters = new Set<{ done: (spans: ReceivedSpan[]) => boolean; resolve: () => void }>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const type = req.headers["content-type"] ?? "";
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      contentTypes.push(type);
      const json = type.startsWith("application/json");
      spans.push(...(json ? decodeJsonExport(body.toString("utf8")) : decodeProtobufExport(body)));
      // An empty ExportTraceServiceResponse: all accepted.
      res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" }).end(json ? "{}" : "");
      for (const w of waiters) {
        if (w.done(spans)) {
          waiters.delete(w);
          w.resolve();
        }
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    waitFor(done) {
      if (done(spans)) return Promise.resolve();
      return new Promise((resolve) => waiters.add({ done, resolve }));
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
