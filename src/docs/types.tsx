/** Field types as the page shows them, linked to the message, enum or JSON form they name. */
import type { ApiReference, FieldDoc, TypeRef } from "./reference.js";

/** The section id of a message or enum (its full name), or of the JSON forms for google.protobuf types. */
export function typeAnchor(name: string): string {
  return name.startsWith("google.protobuf.") ? "json-mapping" : name;
}

/** "Job" for leasequeue.v1.Job, "Duration" for google.protobuf.Duration. */
export function shortName(reference: ApiReference, fullName: string): string {
  const doc = reference.messages.find((m) => m.fullName === fullName) ?? reference.enums.find((e) => e.fullName === fullName);
  return doc?.name ?? fullName.slice(fullName.lastIndexOf(".") + 1);
}

export function TypeName({ reference, type }: { reference: ApiReference; type: TypeRef }) {
  if (type.kind === "scalar") return <code>{type.name}</code>;
  return (
    <a href={`#${typeAnchor(type.name)}`} title={type.name}>
      <code>{shortName(reference, type.name)}</code>
    </a>
  );
}

/** `repeated Job`, `map<string, HealthCheckResponse>`, `optional int64`. */
export function FieldType({ reference, field }: { reference: ApiReference; field: FieldDoc }) {
  if (field.label === "map") {
    return (
      <>
        <code>{`map<${field.mapKey ?? "string"}, `}</code>
        <TypeName reference={reference} type={field.type} />
        <code>{">"}</code>
      </>
    );
  }
  return (
    <>
      {field.label !== "" && <span class="label">{field.label} </span>}
      <TypeName reference={reference} type={field.type} />
    </>
  );
}
