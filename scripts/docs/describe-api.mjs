/**
 * The API reference's services, messages, enums and well-known types, read
 * from a descriptor set (buf build --as-file-descriptor-set, with source
 * info) through @bufbuild/protobuf's file registry. The shape is
 * src/docs/reference.ts.
 */
import { createFileRegistry, fromBinary, ScalarType } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createCommentReader } from "./source-comments.mjs";

/** proto3 JSON forms of the google.protobuf types a field may use. */
const WELL_KNOWN_JSON = {
  "google.protobuf.Duration": { json: "a string of seconds with an `s` suffix, up to 9 decimals", example: '"60s", "1.5s"' },
  "google.protobuf.Timestamp": { json: "an RFC 3339 string, UTC (`Z`)", example: '"2026-11-30T13:08:49.592Z"' },
  "google.protobuf.Value": { json: "any JSON value", example: '{"to": "ada@example.com"}, [1, 2], "text", 3, true, null' },
  "google.protobuf.Struct": { json: "a JSON object", example: '{"a": 1}' },
  "google.protobuf.ListValue": { json: "a JSON array", example: "[1, 2]" },
  "google.protobuf.FieldMask": {
    json: "a string of lowerCamelCase field paths separated by commas",
    example: '"maxRunning,rateLimit"',
  },
  "google.protobuf.Any": {
    json: "a JSON object with `@type` naming the message, then its fields",
    example: '{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "JOB_NOT_FOUND"}',
  },
};

const isWellKnown = (typeName) => typeName.startsWith("google.protobuf.");

/**
 * @param {Uint8Array} descriptorSet a serialized google.protobuf.FileDescriptorSet
 * @param {{ services: string[], extraMessages: string[], roleOf: (service: string, method: string) => string | undefined }} options
 */
export function describeApi(descriptorSet, { services, extraMessages, roleOf }) {
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet));
  const commentOf = createCommentReader();
  const serviceDescs = services.map((name) => {
    const service = registry.getService(name);
    if (service === undefined) throw new Error(`the descriptor set has no service ${name}`);
    return service;
  });

  // Every message and enum of the services' files, then whatever their fields reach.
  const messages = new Map();
  const enums = new Map();
  const addEnum = (desc) => {
    if (!enums.has(desc.typeName)) enums.set(desc.typeName, desc);
  };
  const addMessage = (desc) => {
    if (messages.has(desc.typeName) || isWellKnown(desc.typeName)) return;
    messages.set(desc.typeName, desc);
    for (const nested of desc.nestedEnums) addEnum(nested);
    for (const nested of desc.nestedMessages) if (!nested.proto.options?.mapEntry) addMessage(nested);
    for (const field of desc.fields) {
      if (field.message) addMessage(field.message);
      if (field.enum) addEnum(field.enum);
    }
  };
  for (const service of serviceDescs) {
    for (const desc of service.file.messages) addMessage(desc);
    for (const desc of service.file.enums) addEnum(desc);
  }
  for (const service of serviceDescs) {
    for (const method of service.methods) {
      addMessage(method.input);
      addMessage(method.output);
    }
  }
  for (const name of extraMessages) {
    const desc = registry.getMessage(name);
    if (desc === undefined) throw new Error(`the descriptor set has no message ${name}`);
    addMessage(desc);
  }

  // The services' own files first, in their order; then the rest, as reached.
  const files = serviceDescs.map((service) => service.file);
  const ordered = (descs) => {
    const rank = (desc) => (files.includes(desc.file) ? files.indexOf(desc.file) : files.length);
    return [...descs].sort((a, b) => rank(a) - rank(b));
  };
  const wellKnown = new Set();
  const messageDocs = ordered(messages.values()).map((desc) => describeMessage(desc, commentOf, wellKnown));
  return {
    services: serviceDescs.map((desc) => describeService(desc, commentOf, roleOf)),
    messages: messageDocs,
    enums: ordered(enums.values()).map((desc) => describeEnum(desc, commentOf)),
    wellKnownTypes: [...wellKnown].sort().map((fullName) => {
      const form = WELL_KNOWN_JSON[fullName];
      if (form === undefined) throw new Error(`a field uses ${fullName}: write its JSON form in scripts/docs/describe-api.mjs`);
      return { fullName, ...form };
    }),
  };
}

function describeService(desc, commentOf, roleOf) {
  return {
    fullName: desc.typeName,
    name: desc.name,
    comment: commentOf(desc),
    methods: desc.methods.map((method) => {
      const role = roleOf(desc.typeName, method.name);
      return {
        name: method.name,
        fullName: `${desc.typeName}.${method.name}`,
        path: `/${desc.typeName}/${method.name}`,
        kind: method.methodKind,
        input: method.input.typeName,
        output: method.output.typeName,
        comment: commentOf(method),
        ...(role === undefined ? {} : { role }),
      };
    }),
  };
}

/** "BadRequest.FieldViolation" for google.rpc.BadRequest.FieldViolation. */
function localName(desc) {
  const pkg = desc.file.proto.package;
  return pkg === "" ? desc.typeName : desc.typeName.slice(pkg.length + 1);
}

function describeMessage(desc, commentOf, wellKnown) {
  return {
    fullName: desc.typeName,
    name: localName(desc),
    package: desc.file.proto.package,
    comment: commentOf(desc),
    fields: desc.fields.map((field) => describeField(field, commentOf, wellKnown)),
  };
}

function typeRef(field, kind) {
  if (kind === "message") return { kind: "message", name: field.message.typeName };
  if (kind === "enum") return { kind: "enum", name: field.enum.typeName };
  return { kind: "scalar", name: ScalarType[field.scalar].toLowerCase() };
}

function describeField(field, commentOf, wellKnown) {
  let type;
  let label = "";
  let mapKey;
  switch (field.fieldKind) {
    case "list":
      type = typeRef(field, field.listKind);
      label = "repeated";
      break;
    case "map":
      type = typeRef(field, field.mapKind);
      label = "map";
      mapKey = ScalarType[field.mapKey].toLowerCase();
      break;
    default:
      type = typeRef(field, field.fieldKind);
      if (field.proto.proto3Optional) label = "optional";
  }
  if (type.kind === "message" && isWellKnown(type.name)) wellKnown.add(type.name);
  return {
    name: field.name,
    jsonName: field.jsonName,
    number: field.number,
    type,
    label,
    ...(mapKey === undefined ? {} : { mapKey }),
    ...(field.oneof === undefined ? {} : { oneof: field.oneof.name }),
    comment: commentOf(field),
  };
}

function describeEnum(desc, commentOf) {
  return {
    fullName: desc.typeName,
    name: localName(desc),
    package: desc.file.proto.package,
    comment: commentOf(desc),
    values: desc.values.map((value) => ({ name: value.name, number: value.number, comment: commentOf(value) })),
  };
}
