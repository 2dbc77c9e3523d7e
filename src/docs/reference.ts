/**
 * The shape of `/docs/reference.json`: the API reference that
 * scripts/build-docs.mjs writes at build time from a buf descriptor set with
 * source info (the protos' own comments), the bounds of
 * src/domain/request-bounds.ts, the roles of src/service/rpc-roles.ts and the
 * errors of src/service/error-table.ts. The page renders it; tools may read
 * it too.
 *
 * Comments and table cells are plain text in which `backticks` mark code.
 */
export interface ApiReference {
  /** Services in the order the page lists them (leasequeue.v1 first, then grpc.health.v1). */
  services: ServiceDoc[];
  /** Every message of the services' files, then the other messages their fields reach (google.protobuf.* excepted). */
  messages: MessageDoc[];
  /** The same for enums. */
  enums: EnumDoc[];
  /** JSON forms of the google.protobuf types that fields use. */
  wellKnownTypes: WellKnownTypeDoc[];
  bounds: BoundDoc[];
  errors: ErrorDoc[];
}

export interface ServiceDoc {
  /** e.g. "leasequeue.v1.LeaseQueueService" */
  fullName: string;
  name: string;
  comment: string;
  methods: MethodDoc[];
}

export type MethodKind = "unary" | "server_streaming" | "client_streaming" | "bidi_streaming";

export interface MethodDoc {
  /** e.g. "Submit" */
  name: string;
  /** e.g. "leasequeue.v1.LeaseQueueService.Submit" (the anchor of its section) */
  fullName: string;
  /** The HTTP path: "/leasequeue.v1.LeaseQueueService/Submit" */
  path: string;
  kind: MethodKind;
  /** Full type names of the request and response messages. */
  input: string;
  output: string;
  comment: string;
  /** The role a bearer token needs for it when authentication is on; absent: none needed. */
  role?: string;
}

export interface MessageDoc {
  /** e.g. "google.rpc.BadRequest.FieldViolation" */
  fullName: string;
  /** Its name inside its package, e.g. "BadRequest.FieldViolation" */
  name: string;
  package: string;
  comment: string;
  fields: FieldDoc[];
}

/** What a field holds: a scalar by its proto name ("string", "int64"), or a message or enum by full name. */
export type TypeRef = { kind: "scalar"; name: string } | { kind: "message"; name: string } | { kind: "enum"; name: string };

export interface FieldDoc {
  /** The proto name, e.g. "worker_id" */
  name: string;
  /** The JSON name, e.g. "workerId" */
  jsonName: string;
  number: number;
  /** For a map, the value type. */
  type: TypeRef;
  /** "" for a singular field. */
  label: "" | "repeated" | "optional" | "map";
  /** The scalar type of a map's keys. */
  mapKey?: string;
  /** The oneof the field belongs to (never the synthetic one of `optional`). */
  oneof?: string;
  comment: string;
}

export interface EnumDoc {
  fullName: string;
  name: string;
  package: string;
  comment: string;
  values: EnumValueDoc[];
}

export interface EnumValueDoc {
  name: string;
  number: number;
  comment: string;
}

export interface WellKnownTypeDoc {
  /** e.g. "google.protobuf.Duration" */
  fullName: string;
  /** Its JSON form, e.g. "a string of seconds with an `s` suffix". */
  json: string;
  /** e.g. `"60s"` */
  example: string;
}

export interface BoundDoc {
  /** JSON field names it applies to, e.g. ["queue", "task"]; empty when `subject` names what it bounds. */
  fields: string[];
  /** What it bounds when that is not a field, e.g. "request body". */
  subject?: string;
  bound: string;
  /** What an absent (or zero) field means. */
  default: string;
}

export interface ErrorDoc {
  situation: string;
  /** The Connect code, e.g. "invalid_argument". */
  code: string;
  /** The rest of the code cell: the HTTP status for Connect, e.g. "(400)". */
  status: string;
  detail: string;
  /** The google.rpc.ErrorInfo reasons named in `detail`. */
  reasons: string[];
}
