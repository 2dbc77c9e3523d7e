/**
 * The API reference that `npm run build` writes to dist/docs/reference.json
 * (scripts/build-docs.mjs) cannot go stale: it is held here against the
 * generated descriptors in gen/ts (a separate path from the protos: buf
 * generate, not buf build) — every RPC of both services with its kind and
 * types, every field of every message, every enum value — and against the
 * server's own tables: the roles, the bounds and the error codes and
 * ErrorInfo reasons the server really sends.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { Code, type ConnectError } from "@connectrpc/connect";
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { ApiReference, FieldDoc, TypeRef } from "../../src/docs/reference.js";
import { BOUNDS, DEFAULTS } from "../../src/domain/request-bounds.js";
import { QueueError, type QueueErrorReason } from "../../src/domain/errors.js";
import { defaultDocsDir } from "../../src/server/docs-files.js";
import { payloadTooLarge, purgeNotConfirmed, toConnectError } from "../../src/service/errors.js";
import { RPC_ROLES } from "../../src/service/rpc-roles.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

const SERVICES = [LeaseQueueService, Health];

/** Every message of the services' files, nested ones included (map entries and google.protobuf excepted). */
function fileMessages(): DescMessage[] {
  const found: DescMessage[] = [];
  const collect = (desc: DescMessage) => {
    if (desc.proto.options?.mapEntry) return;
    found.push(desc);
    desc.nestedMessages.forEach(collect);
  };
  for (const service of SERVICES) service.file.messages.forEach(collect);
  return found;
}

function fileEnums(): DescEnum[] {
  const nested = fileMessages().flatMap((m) => m.nestedEnums);
  return [...SERVICES.flatMap((s) => s.file.enums), ...nested];
}

/** What the reference should say about a field, from the generated descriptor. */
function expectedField(field: DescField): Pick<FieldDoc, "name" | "jsonName" | "number" | "type" | "label"> {
  const ref = (kind: string | undefined): TypeRef => {
    if (kind === "message") return { kind: "message", name: field.message!.typeName };
    if (kind === "enum") return { kind: "enum", name: field.enum!.typeName };
    return { kind: "scalar", name: ScalarType[field.scalar!].toLowerCase() };
  };
  const base = { name: field.name, jsonName: field.jsonName, number: field.number };
  if (field.fieldKind === "list") return { ...base, type: ref(field.listKind), label: "repeated" };
  if (field.fieldKind === "map") return { ...base, type: ref(field.mapKind), label: "map" };
  return { ...base, type: ref(field.fieldKind), label: field.proto.proto3Optional ? "optional" : "" };
}

/** Connect's wire name of a code: `invalid_argument`. */
const codeName = (code: Code) => Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

/** The reasons of QueueErrorReason, read from its declaration (a type has no runtime list). */
function queueErrorReasons(): QueueErrorReason[] {
  const source = readFileSync(join(PACKAGE_ROOT, "src/domain/errors.ts"), "utf8");
  const union = /export type QueueErrorReason =([^;]+);/.exec(source)![1];
  return [...union.matchAll(/"([A-Z_]+)"/g)].map((m) => m[1] as QueueErrorReason);
}

/** Every ErrorInfo reason the server can send, with the code it travels with. */
function serverReasons(): Array<{ reason: string; code: string }> {
  const errors: ConnectError[] = [
    ...queueErrorReasons().map((reason) => toConnectError(new QueueError(reason, "x"))),
    payloadTooLarge("payload", 70_000, BOUNDS.jsonBytes),
    purgeNotConfirmed("confirm", "emails"),
  ];
  return errors.flatMap((error) => error.findDetails(ErrorInfoSchema).map((info) => ({ reason: info.reason, code: codeName(error.code) })));
}

describe("the API reference (dist/docs/reference.json)", () => {
  let reference: ApiReference;

  beforeAll(() => {
    const file = join(defaultDocsDir(), "reference.json");
    // `npm test` builds it (pretest); `npx vitest run test/docs` alone may not have.
    if (!existsSync(file)) execFileSync("npm", ["run", "build", "--silent"], { cwd: PACKAGE_ROOT, stdio: "inherit" });
    reference = JSON.parse(readFileSync(file, "utf8")) as ApiReference;
  }, 120_000);

  it("lists both services and every RPC of each, with its path, kind and types", () => {
    expect(reference.services.map((s) => s.fullName)).toEqual(SERVICES.map((s) => s.typeName));
    for (const service of SERVICES) {
      const doc = reference.services.find((s) => s.fullName === service.typeName)!;
      expect(doc.methods.map((m) => m.name)).toEqual(service.methods.map((m) => m.name));
      for (const method of service.methods) {
        expect(
          doc.methods.find((m) => m.name === method.name),
          method.name,
        ).toMatchObject({
          fullName: `${service.typeName}.${method.name}`,
          path: `/${service.typeName}/${method.name}`,
          kind: method.methodKind,
          input: method.input.typeName,
          output: method.output.typeName,
        });
      }
    }
  });

  it("carries the protos' own comments (built with source info)", () => {
    const lq = reference.services[0];
    expect(lq.comment).toBe("LeaseQueueService is a durable job queue with explicit lease ownership.");
    // Every RPC of leasequeue.v1 is documented, and its comment starts with its name.
    for (const method of lq.methods) expect(method.comment, method.name).toMatch(new RegExp(`^${method.name} `));
    const submit = reference.messages.find((m) => m.fullName === "leasequeue.v1.SubmitRequest")!;
    expect(submit.fields.find((f) => f.name === "max_attempts")!.comment).toBe("1..100; 0 means 3.");
    // Trailing comments too.
    const status = reference.enums.find((e) => e.fullName === "grpc.health.v1.HealthCheckResponse.ServingStatus")!;
    expect(status.values.find((v) => v.name === "SERVICE_UNKNOWN")!.comment).toBe("Used only by the Watch method.");
  });

  it("lists every message of both services' files with every field, its type and label", () => {
    for (const message of fileMessages()) {
      const doc = reference.messages.find((m) => m.fullName === message.typeName);
      expect(doc, message.typeName).toBeDefined();
      expect(
        doc!.fields.map((f) => f.name),
        message.typeName,
      ).toEqual(message.fields.map((f) => f.name));
      for (const field of message.fields) {
        expect(
          doc!.fields.find((f) => f.name === field.name),
          `${message.typeName}.${field.name}`,
        ).toMatchObject(expectedField(field));
      }
    }
    const schedule = reference.messages
      .find((m) => m.fullName === "leasequeue.v1.SubmitRequest")!
      .fields.filter((f) => f.oneof === "schedule");
    expect(schedule.map((f) => f.jsonName)).toEqual(["scheduleTime", "delay"]);
    const after = reference.messages
      .find((m) => m.fullName === "leasequeue.v1.WatchEventsRequest")!
      .fields.find((f) => f.name === "after_sequence")!;
    expect(after).toMatchObject({ label: "optional" });
    expect(after.oneof).toBeUndefined();
  });

  it("lists every enum of both files with every value", () => {
    for (const desc of fileEnums()) {
      const doc = reference.enums.find((e) => e.fullName === desc.typeName);
      expect(doc, desc.typeName).toBeDefined();
      expect(doc!.values.map((v) => [v.name, v.number])).toEqual(desc.values.map((v) => [v.name, v.number]));
    }
  });

  it("resolves every field type to a listed message, enum or well-known type with its JSON form", () => {
    const messages = new Set(reference.messages.map((m) => m.fullName));
    const enums = new Set(reference.enums.map((e) => e.fullName));
    const wellKnown = new Set(reference.wellKnownTypes.map((w) => w.fullName));
    for (const message of reference.messages) {
      for (const field of message.fields) {
        const where = `${message.fullName}.${field.name}`;
        if (field.type.kind === "enum") expect(enums.has(field.type.name), where).toBe(true);
        if (field.type.kind === "message") expect(messages.has(field.type.name) || wellKnown.has(field.type.name), where).toBe(true);
      }
    }
    expect([...wellKnown].sort()).toEqual([
      "google.protobuf.Any",
      "google.protobuf.Duration",
      "google.protobuf.FieldMask",
      "google.protobuf.Timestamp",
      "google.protobuf.Value",
    ]);
    // The error details a client decodes are there too.
    for (const name of ["google.rpc.Status", "google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.BadRequest.FieldViolation"]) {
      expect(messages.has(name), name).toBe(true);
    }
  });

  it("gives each RPC of leasequeue.v1 the role its token needs, and Health none", () => {
    for (const method of reference.services[0].methods) expect(method.role, method.name).toBe(RPC_ROLES[method.name]);
    for (const method of reference.services[1].methods) expect(method.role, method.name).toBeUndefined();
  });

  it("states the bounds the server validates against, for fields that exist", () => {
    const row = (field: string) => reference.bounds.find((b) => b.fields.includes(field))!;
    expect(row("priority").bound).toContain(`${BOUNDS.priority[0]}..${BOUNDS.priority[1]}`);
    expect(row("maxAttempts")).toMatchObject({
      bound: `${BOUNDS.maxAttempts[0]}..${BOUNDS.maxAttempts[1]}`,
      default: String(DEFAULTS.maxAttempts),
    });
    expect(row("maxJobs").bound).toBe(`${BOUNDS.maxJobs[0]}..${BOUNDS.maxJobs[1]}`);
    expect(row("pageSize").bound).toBe(
      `${BOUNDS.pageSize[0]}..${BOUNDS.pageSize[1]} (ListGroups: ${BOUNDS.groupPageSize[0]}..${BOUNDS.groupPageSize[1]})`,
    );
    expect(row("pageSize").default).toBe(`${DEFAULTS.pageSize} (ListGroups: ${DEFAULTS.groupPageSize})`);
    expect(row("groupKey").bound).toContain(BOUNDS.groupKey.source);
    expect(row("groupMaxRunning").bound).toContain(`${BOUNDS.groupMaxRunning[0]}..${BOUNDS.groupMaxRunning[1]}`);
    expect(row("leaseDuration")).toMatchObject({ bound: "1s..12h", default: `${DEFAULTS.leaseDurationMs / 1000}s` });
    expect(row("ratePeriod")).toMatchObject({ bound: "1s..1d", default: "1s" });
    expect(row("maxRunning").bound).toContain(`${BOUNDS.maxRunning[0]}..${BOUNDS.maxRunning[1]}`);
    expect(row("queue").bound).toContain(BOUNDS.name.source);
    expect(row("workerId").bound).toContain(BOUNDS.workerId.source);
    expect(row("payload").bound).toContain(`${BOUNDS.jsonBytes / 1024} KiB`);
    expect(row("payload").bound).toContain(`${BOUNDS.jsonDepth} levels`);
    expect(reference.bounds.find((b) => b.subject === "request body")!.default).toBe(`${DEFAULTS.maxRequestBytes} bytes`);
    // Every field the table names is a field of a message a client sends.
    const sent = new Set<string>();
    const visit = (name: string): void => {
      const message = reference.messages.find((m) => m.fullName === name);
      if (message === undefined || sent.has(name)) return;
      sent.add(name);
      for (const field of message.fields) if (field.type.kind === "message") visit(field.type.name);
    };
    for (const method of reference.services.flatMap((s) => s.methods)) visit(method.input);
    const requestFields = new Set(reference.messages.filter((m) => sent.has(m.fullName)).flatMap((m) => m.fields.map((f) => f.jsonName)));
    for (const name of reference.bounds.flatMap((b) => b.fields)) expect(requestFields.has(name), name).toBe(true);
  });

  it("lists every ErrorInfo reason the server sends, with the code it sends it with", () => {
    const reasons = serverReasons();
    expect(reasons.length).toBeGreaterThanOrEqual(12);
    for (const { reason, code } of reasons) {
      const row = reference.errors.find((e) => e.reasons.includes(reason));
      expect(row, reason).toBeDefined();
      expect(row!.code, reason).toBe(code);
    }
    // Every code in the table is one of Connect's.
    const codes = new Set(
      Object.values(Code)
        .filter((c): c is Code => typeof c === "number")
        .map(codeName),
    );
    for (const row of reference.errors) expect(codes.has(row.code), row.code).toBe(true);
    expect(reference.errors.find((e) => e.situation.startsWith("field out of bounds"))).toMatchObject({
      code: "invalid_argument",
      status: "(400)",
    });
  });
});
