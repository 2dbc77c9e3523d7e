import type { DescFile, DescService } from "@bufbuild/protobuf";
import { toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type DescriptorProto, type EnumDescriptorProto } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../../gen/ts/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/ts/grpc/reflection/v1alpha/reflection_pb.js";

/** gRPC status codes used inside error_response (a plain int32 on the wire). */
const NOT_FOUND = 5;
const INVALID_ARGUMENT = 3;

/**
 * The request fields both versions share. v1 and v1alpha differ only in their
 * package name, so one structural type covers the two generated schema sets.
 */
type ReflectionRequest = {
  host: string;
  messageRequest:
    | { case: "fileByFilename" | "fileContainingSymbol" | "allExtensionNumbersOfType" | "listServices"; value: string }
    | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
    | { case: undefined; value?: undefined };
};

/** A `message_response` as an init object without `$typeName`, valid for either version. */
type ReflectionAnswer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** Lookup tables built once at registration; requests only read them. */
type Index = {
  services: string[];
  files: Map<string, DescFile>; // by proto name, "leasequeue/v1/leasequeue.proto"
  symbols: Map<string, DescFile>; // fully-qualified name -> declaring file
};

function buildIndex(services: DescService[], extraFiles: DescFile[]): Index {
  const files = new Map<string, DescFile>();
  const symbols = new Map<string, DescFile>();
  const addFile = (file: DescFile): void => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    file.dependencies.forEach(addFile);
    // Walk the FileDescriptorProto rather than DescFile: it also names map
    // entries and enum values (siblings of their enum), as grpc-go does.
    const add = (name: string) => symbols.set(name, file);
    const enums = (scope: string, list: EnumDescriptorProto[]) =>
      list.forEach((e) => [e.name, ...e.value.map((v) => v.name)].forEach((n) => add(scope + n)));
    const messages = (scope: string, list: DescriptorProto[]): void =>
      list.forEach((m) => {
        add(scope + m.name);
        m.extension.forEach((x) => add(`${scope}${m.name}.${x.name}`));
        messages(`${scope}${m.name}.`, m.nestedType);
        enums(`${scope}${m.name}.`, m.enumType);
      });
    const pkg = file.proto.package ? `${file.proto.package}.` : "";
    messages(pkg, file.proto.messageType);
    enums(pkg, file.proto.enumType);
    file.proto.extension.forEach((x) => add(pkg + x.name));
    file.proto.service.forEach((s) => [s.name, ...s.method.map((m) => `${s.name}.${m.name}`)].forEach((n) => add(pkg + n)));
  };
  services.forEach((s) => addFile(s.file));
  extraFiles.forEach(addFile);
  return { services: [...new Set(services.map((s) => s.typeName))], files, symbols };
}

/** The file followed by its transitive dependencies, each once, as serialized FileDescriptorProtos. */
function fileResponse(file: DescFile): ReflectionAnswer {
  const seen = new Set<DescFile>();
  const visit = (f: DescFile): void => {
    if (seen.has(f)) return;
    seen.add(f);
    f.dependencies.forEach(visit);
  };
  visit(file);
  const fileDescriptorProto = [...seen].map((f) => toBinary(FileDescriptorProtoSchema, f.proto));
  return { case: "fileDescriptorResponse", value: { fileDescriptorProto } };
}

function notFound(what: string): ReflectionAnswer {
  return { case: "errorResponse", value: { errorCode: NOT_FOUND, errorMessage: `${what} not found` } };
}

function answer(index: Index, request: ReflectionRequest["messageRequest"]): ReflectionAnswer {
  switch (request.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: index.services.map((name) => ({ name })) } };
    case "fileByFilename": {
      const file = index.files.get(request.value);
      return file ? fileResponse(file) : notFound(`file "${request.value}"`);
    }
    case "fileContainingSymbol": {
      const file = index.symbols.get(request.value.replace(/^\./, ""));
      return file ? fileResponse(file) : notFound(`symbol "${request.value}"`);
    }
    case "fileContainingExtension":
      return notFound(`extension ${request.value.extensionNumber} of "${request.value.containingType}"`);
    case "allExtensionNumbersOfType":
      return notFound(`extensions of "${request.value}"`);
    default:
      return { case: "errorResponse", value: { errorCode: INVALID_ARGUMENT, errorMessage: "empty message_request" } };
  }
}

/**
 * One response per request, in order. Generic over the request type so that
 * `original_request` keeps the exact generated type of the version being
 * served, which makes the yielded init objects valid for that version.
 */
async function* serve<R extends ReflectionRequest>(index: Index, requests: AsyncIterable<R>) {
  for await (const request of requests) {
    yield { validHost: request.host, originalRequest: request, messageResponse: answer(index, request.messageRequest) };
  }
}

/**
 * Registers gRPC server reflection (`grpc.reflection.v1` and the older
 * `v1alpha`, which grpcurl and some tools still ask first) on the router.
 *
 * connect-node has no reflection package; without it `buf curl`, grpcurl and
 * Postman need the .proto files at hand. This serves the descriptors that
 * protoc-gen-es already embeds in the generated code, so it can never drift
 * from what the server really speaks.
 *
 * @param services every service the router serves (include `Health` if it is
 *   registered); the reflection services are added to the list by itself.
 * @param extraFiles files no service imports but clients need, such as the
 *   google.rpc error details, so tools can decode `grpc-status-details-bin`.
 */
export function registerReflection(router: ConnectRouter, services: DescService[], extraFiles: DescFile[] = []): void {
  const index = buildIndex([...services, v1.ServerReflection, v1alpha.ServerReflection], extraFiles);
  router.service(v1.ServerReflection, { serverReflectionInfo: (requests) => serve(index, requests) });
  router.service(v1alpha.ServerReflection, { serverReflectionInfo: (requests) => serve(index, requests) });
}
