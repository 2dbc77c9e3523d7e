/**
 * The comments written above (and after) each element of a .proto file, as
 * kept in a descriptor's source code info: every element has a path of field
 * numbers and indexes from its file (message 3 of the file is [4, 3], its
 * field 2 is [4, 3, 2, 2]), and the location with that path holds its
 * comments.
 */
import {
  DescriptorProtoSchema,
  EnumDescriptorProtoSchema,
  FileDescriptorProtoSchema,
  ServiceDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";

const FILE = FileDescriptorProtoSchema.field;
const MESSAGE = DescriptorProtoSchema.field;

/** The source path of a message, enum, field, oneof, enum value, service or method. */
function sourcePath(desc) {
  switch (desc.kind) {
    case "message":
      return desc.parent
        ? [...sourcePath(desc.parent), MESSAGE.nestedType.number, desc.parent.proto.nestedType.indexOf(desc.proto)]
        : [FILE.messageType.number, desc.file.proto.messageType.indexOf(desc.proto)];
    case "enum":
      return desc.parent
        ? [...sourcePath(desc.parent), MESSAGE.enumType.number, desc.parent.proto.enumType.indexOf(desc.proto)]
        : [FILE.enumType.number, desc.file.proto.enumType.indexOf(desc.proto)];
    case "field":
      return [...sourcePath(desc.parent), MESSAGE.field.number, desc.parent.proto.field.indexOf(desc.proto)];
    case "oneof":
      return [...sourcePath(desc.parent), MESSAGE.oneofDecl.number, desc.parent.proto.oneofDecl.indexOf(desc.proto)];
    case "enum_value":
      return [...sourcePath(desc.parent), EnumDescriptorProtoSchema.field.value.number, desc.parent.proto.value.indexOf(desc.proto)];
    case "service":
      return [FILE.service.number, desc.file.proto.service.indexOf(desc.proto)];
    case "rpc":
      return [...sourcePath(desc.parent), ServiceDescriptorProtoSchema.field.method.number, desc.parent.proto.method.indexOf(desc.proto)];
    default:
      throw new Error(`no source path for a ${desc.kind}`);
  }
}

function fileOf(desc) {
  return desc.kind === "field" || desc.kind === "oneof" || desc.kind === "enum_value" || desc.kind === "rpc"
    ? fileOf(desc.parent)
    : desc.file;
}

/** protoc keeps the space after `//` and the line breaks: drop the one, keep paragraphs. */
function tidy(text) {
  return text
    .split("\n")
    .map((line) => (line.startsWith(" ") ? line.slice(1) : line).trimEnd())
    .join("\n")
    .trim();
}

/** Reads comments from descriptors built with source info; throws when a file has none (built without it). */
export function createCommentReader() {
  const byFile = new Map();
  const locationsOf = (file) => {
    let locations = byFile.get(file);
    if (locations === undefined) {
      const info = file.proto.sourceCodeInfo;
      if (info === undefined || info.location.length === 0) {
        throw new Error(`${file.proto.name} has no source code info: build the descriptor set without --exclude-source-info`);
      }
      locations = new Map(info.location.map((l) => [l.path.join("."), l]));
      byFile.set(file, locations);
    }
    return locations;
  };
  /** The element's leading and trailing comments, tidied; "" when it has none. */
  return function commentOf(desc) {
    const location = locationsOf(fileOf(desc)).get(sourcePath(desc).join("."));
    if (location === undefined) throw new Error(`no source location for ${desc.toString()}`);
    return [location.leadingComments, location.trailingComments]
      .filter((c) => c !== undefined && c.trim() !== "")
      .map(tidy)
      .join("\n\n");
  };
}
