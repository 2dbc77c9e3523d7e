import http2 from "node:http2";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import * as v1 from "../../gen/ts/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/ts/grpc/reflection/v1alpha/reflection_pb.js";
import { JobSchema, LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { registerHealth, HealthStatus } from "../../src/server/health.js";
import { registerReflection } from "../../src/server/reflection.js";
import { streamOf } from "../helpers/stream-of.js";

const LEASEQUEUE_FILE = "leasequeue/v1/leasequeue.proto";
/** What leasequeue.proto imports, in its order. */
const LEASEQUEUE_IMPORTS = [
  "google/protobuf/duration.proto",
  "google/protobuf/field_mask.proto",
  "google/protobuf/struct.proto",
  "google/protobuf/timestamp.proto",
  "google/rpc/status.proto",
];
/** Its transitive dependencies (google.rpc.Status holds google.protobuf.Any), sorted. */
const LEASEQUEUE_DEPS = [...LEASEQUEUE_IMPORTS, "google/protobuf/any.proto"].sort();

let server: http2.Http2Server;
let baseUrl: string;
const sessions = new Set<http2.ServerHttp2Session>();

beforeAll(async () => {
  const routes = (router: ConnectRouter) => {
    registerHealth(router, new HealthStatus());
    registerReflection(router, [LeaseQueueService, Health]);
  };
  server = http2.createServer(connectNodeAdapter({ routes }));
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of sessions) s.destroy();
  server.close();
  await once(server, "close");
});

type Request = MessageInitShape<typeof v1.ServerReflectionRequestSchema>;

/** Sends the requests on one v1 stream and collects the responses. */
async function reflect(...requests: Request[]): Promise<v1.ServerReflectionResponse[]> {
  const client = createClient(v1.ServerReflection, createGrpcTransport({ baseUrl }));
  const responses: v1.ServerReflectionResponse[] = [];
  for await (const res of client.serverReflectionInfo(streamOf(...requests))) responses.push(res);
  return responses;
}

function files(res: { messageResponse: { case: string | undefined; value?: unknown } }): FileDescriptorProto[] {
  expect(res.messageResponse.case).toBe("fileDescriptorResponse");
  const value = res.messageResponse.value as v1.FileDescriptorResponse;
  return value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
}

describe("grpc.reflection.v1", () => {
  it("lists the given services, the reflection services and health", async () => {
    const [res] = await reflect({ messageRequest: { case: "listServices", value: "*" } });
    expect(res.messageResponse.case).toBe("listServicesResponse");
    const names = res.messageResponse.case === "listServicesResponse" ? res.messageResponse.value.service.map((s) => s.name) : [];
    expect(names.sort()).toEqual([
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      "leasequeue.v1.LeaseQueueService",
    ]);
  });

  it.each([
    ["service", "leasequeue.v1.LeaseQueueService", LEASEQUEUE_FILE],
    ["method", "leasequeue.v1.LeaseQueueService.StreamClaims", LEASEQUEUE_FILE],
    ["message", "leasequeue.v1.Job", LEASEQUEUE_FILE],
    ["enum", "leasequeue.v1.JobState", LEASEQUEUE_FILE],
    ["enum value", "leasequeue.v1.JOB_STATE_QUEUED", LEASEQUEUE_FILE],
    ["nested message (map entry)", "grpc.health.v1.HealthListResponse.StatusesEntry", "grpc/health/v1/health.proto"],
    ["nested enum", "grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc/health/v1/health.proto"],
    ["well-known type", "google.protobuf.Duration", "google/protobuf/duration.proto"],
    ["reflection itself", "grpc.reflection.v1alpha.ServerReflection", "grpc/reflection/v1alpha/reflection.proto"],
  ])("finds the file containing a %s", async (_kind, symbol, fileName) => {
    const [res] = await reflect({ messageRequest: { case: "fileContainingSymbol", value: symbol } });
    expect(files(res)[0].name).toBe(fileName);
  });

  it("sends the file first, then its transitive dependencies, which resolve to a complete registry", async () => {
    const [res] = await reflect({ messageRequest: { case: "fileContainingSymbol", value: "leasequeue.v1.LeaseQueueService" } });
    const protos = files(res);
    expect(protos[0].name).toBe(LEASEQUEUE_FILE);
    expect(
      protos
        .slice(1)
        .map((p) => p.name)
        .sort(),
    ).toEqual(LEASEQUEUE_DEPS);
    expect(protos[0].dependency).toEqual(LEASEQUEUE_IMPORTS);
    // A client (buf curl, grpcurl) must be able to build descriptors from this alone.
    const registry = createFileRegistry(protos[0], (name) => protos.find((p) => p.name === name));
    const service = registry.getService("leasequeue.v1.LeaseQueueService");
    expect(service?.methods.map((m) => m.name)).toEqual(LeaseQueueService.methods.map((m) => m.name));
    expect(registry.getMessage("leasequeue.v1.Job")?.fields.map((f) => f.name)).toEqual(JobSchema.fields.map((f) => f.name));
  });

  it("finds files by name, including well-known dependencies", async () => {
    const [a, b] = await reflect(
      { messageRequest: { case: "fileByFilename", value: LEASEQUEUE_FILE } },
      { messageRequest: { case: "fileByFilename", value: "google/protobuf/timestamp.proto" } },
    );
    expect(
      files(a)
        .map((p) => p.name)
        .sort(),
    ).toEqual([LEASEQUEUE_FILE, ...LEASEQUEUE_DEPS].sort());
    expect(files(b).map((p) => p.name)).toEqual(["google/protobuf/timestamp.proto"]);
  });

  it("answers unknown names and extension queries with NOT_FOUND, echoing host and request", async () => {
    const responses = await reflect(
      { host: "h", messageRequest: { case: "fileContainingSymbol", value: "leasequeue.v1.Nope" } },
      { messageRequest: { case: "fileByFilename", value: "leasequeue/v1/leasequeue" } }, // DescFile.name, not proto name
      { messageRequest: { case: "fileContainingExtension", value: { containingType: "leasequeue.v1.Job", extensionNumber: 100 } } },
      { messageRequest: { case: "allExtensionNumbersOfType", value: "leasequeue.v1.Job" } },
    );
    expect(responses).toHaveLength(4);
    for (const res of responses) {
      expect(res.messageResponse.case).toBe("errorResponse");
      if (res.messageResponse.case === "errorResponse") {
        expect(res.messageResponse.value.errorCode).toBe(5);
        expect(res.messageResponse.value.errorMessage).toMatch(/not found/);
      }
    }
    expect(responses[0].validHost).toBe("h");
    expect(responses[0].originalRequest?.messageRequest).toEqual({ case: "fileContainingSymbol", value: "leasequeue.v1.Nope" });
  });

  it("answers each request before the client ends its stream", async () => {
    const client = createClient(v1.ServerReflection, createGrpcTransport({ baseUrl }));
    const requests = channel<Request>();
    const responses = client.serverReflectionInfo(requests)[Symbol.asyncIterator]();
    requests.push({ messageRequest: { case: "listServices", value: "" } });
    expect((await responses.next()).value?.messageResponse.case).toBe("listServicesResponse");
    requests.push({ messageRequest: { case: "fileContainingSymbol", value: "leasequeue.v1.Lease" } });
    expect((await responses.next()).value?.messageResponse.case).toBe("fileDescriptorResponse");
    requests.end();
    expect((await responses.next()).done).toBe(true);
  });
});

/**
 * An async iterable fed by hand: push() buffers until the consumer pulls. It
 * is an async generator because connect's client calls throw() on the
 * request iterator (a plain { next } object is refused).
 */
function channel<T>(): AsyncIterable<T> & { push(value: T): void; end(): void } {
  const buffered: IteratorResult<T, undefined>[] = [];
  let waiting: ((r: IteratorResult<T, undefined>) => void) | undefined;
  const put = (r: IteratorResult<T, undefined>) => {
    if (waiting) {
      waiting(r);
      waiting = undefined;
    } else buffered.push(r);
  };
  return {
    push: (value) => put({ value, done: false }),
    end: () => put({ value: undefined, done: true }),
    async *[Symbol.asyncIterator]() {
      for (;;) {
        const r = buffered.shift() ?? (await new Promise<IteratorResult<T, undefined>>((resolve) => (waiting = resolve)));
        if (r.done) return;
        yield r.value;
      }
    },
  };
}

describe("grpc.reflection.v1alpha", () => {
  it("shares the v1 answers", async () => {
    const client = createClient(v1alpha.ServerReflection, createGrpcTransport({ baseUrl }));
    const send = streamOf(
      create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "listServices", value: "" } }),
      create(v1alpha.ServerReflectionRequestSchema, {
        messageRequest: { case: "fileContainingSymbol", value: "leasequeue.v1.LeaseQueueService.Claim" },
      }),
      create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "fileByFilename", value: "nope.proto" } }),
    );
    const responses: v1alpha.ServerReflectionResponse[] = [];
    for await (const res of client.serverReflectionInfo(send)) responses.push(res);
    expect(responses.map((r) => r.$typeName)).toEqual(Array(3).fill("grpc.reflection.v1alpha.ServerReflectionResponse"));
    expect(responses[0].messageResponse.case).toBe("listServicesResponse");
    expect(files(responses[1])[0].name).toBe(LEASEQUEUE_FILE);
    expect(responses[2].messageResponse.case === "errorResponse" && responses[2].messageResponse.value.errorCode).toBe(5);
  });
});

describe("independent client (grpc-js + proto-loader)", () => {
  it("lists services and fetches the file of a symbol", async () => {
    const definition = await protoLoader.load("grpc/reflection/v1/reflection.proto", {
      includeDirs: [new URL("../../proto", import.meta.url).pathname],
      keepCase: true,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(definition) as any;
    const client = new pkg.grpc.reflection.v1.ServerReflection(baseUrl.replace("http://", ""), grpc.credentials.createInsecure());
    try {
      const call = client.ServerReflectionInfo();
      const received: any[] = [];
      call.on("data", (res: any) => received.push(res));
      call.write({ list_services: "" });
      call.write({ file_containing_symbol: "leasequeue.v1.LeaseQueueService" });
      call.end();
      await once(call, "end");

      expect(received).toHaveLength(2);
      expect(received[0].message_response).toBe("list_services_response");
      expect(received[0].list_services_response.service.map((s: any) => s.name)).toContain("leasequeue.v1.LeaseQueueService");
      expect(received[1].message_response).toBe("file_descriptor_response");
      const protos = (received[1].file_descriptor_response.file_descriptor_proto as Buffer[]).map((b) =>
        fromBinary(FileDescriptorProtoSchema, new Uint8Array(b)),
      );
      expect(protos[0].name).toBe(LEASEQUEUE_FILE);
      expect(protos[0].service[0].name).toBe("LeaseQueueService");
      expect(
        protos
          .slice(1)
          .map((p) => p.name)
          .sort(),
      ).toEqual(LEASEQUEUE_DEPS);
    } finally {
      client.close();
    }
  });
});
