/** Messages (their fields) and enums (their values), each a section whose id is its full name. */
import type { ApiReference, EnumDoc, MessageDoc } from "./reference.js";
import { Comment, Text } from "./text.js";
import { boundOf } from "./request-bounds.js";
import { FieldType } from "./types.js";

export function FieldTable({ reference, message }: { reference: ApiReference; message: MessageDoc }) {
  if (message.fields.length === 0) return <p class="muted">No fields.</p>;
  return (
    <table class="fields">
      <thead>
        <tr>
          <th scope="col">Field (JSON)</th>
          <th scope="col">Type</th>
          <th scope="col">Description</th>
        </tr>
      </thead>
      <tbody>
        {message.fields.map((field) => (
          <tr key={field.name} data-field={field.jsonName}>
            <td>
              <code class="field-name">{field.jsonName}</code>
              {field.jsonName !== field.name && <span class="muted proto-name"> {field.name}</span>}
              <span class="muted field-number"> = {field.number}</span>
            </td>
            <td>
              <FieldType reference={reference} field={field} />
            </td>
            <td>
              {field.oneof !== undefined && (
                <p class="oneof">
                  One of <code>{field.oneof}</code>: set at most one of its fields.
                </p>
              )}
              <Comment text={field.comment} />
              <FieldBound reference={reference} message={message} jsonName={field.jsonName} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function FieldBound({ reference, message, jsonName }: { reference: ApiReference; message: MessageDoc; jsonName: string }) {
  const bound = boundOf(reference, message.fullName, jsonName);
  if (bound === undefined) return null;
  return (
    <p class="bound" data-testid="field-bound">
      <a href="#bounds">Bound</a>: <Text text={bound.bound} /> · default <Text text={bound.default} />
    </p>
  );
}

export function MessageSection({ reference, message }: { reference: ApiReference; message: MessageDoc }) {
  return (
    <section class="type" id={message.fullName} data-message={message.fullName}>
      <h3>
        {message.name} <span class="muted kind">message · {message.package}</span>
      </h3>
      <Comment text={message.comment} />
      <FieldTable reference={reference} message={message} />
    </section>
  );
}

export function EnumSection({ doc }: { doc: EnumDoc }) {
  return (
    <section class="type" id={doc.fullName} data-enum={doc.fullName}>
      <h3>
        {doc.name} <span class="muted kind">enum · {doc.package}</span>
      </h3>
      <Comment text={doc.comment} />
      <p class="muted">In JSON, by name (a string); the number is accepted too.</p>
      <table class="fields">
        <thead>
          <tr>
            <th scope="col">Value</th>
            <th scope="col">Number</th>
            <th scope="col">Description</th>
          </tr>
        </thead>
        <tbody>
          {doc.values.map((value) => (
            <tr key={value.name} data-enum-value={value.name}>
              <td>
                <code>{value.name}</code>
              </td>
              <td>{value.number}</td>
              <td>
                <Comment text={value.comment} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The JSON forms of the google.protobuf types fields use, and of the scalars that need a word. */
export function JsonMappingSection({ reference }: { reference: ApiReference }) {
  return (
    <section id="json-mapping">
      <h2>JSON mapping</h2>
      <p>
        Connect JSON is the canonical proto3 JSON mapping: fields by their lowerCamelCase JSON names, enums by name, <code>int64</code> as
        strings (numbers are accepted), <code>bytes</code> as base64, and the types below in their own forms. An absent field takes its
        default; an unknown field is refused with <code>invalid_argument</code>.
      </p>
      <table class="fields">
        <thead>
          <tr>
            <th scope="col">Type</th>
            <th scope="col">JSON</th>
            <th scope="col">Example</th>
          </tr>
        </thead>
        <tbody>
          {reference.wellKnownTypes.map((type) => (
            <tr key={type.fullName} data-well-known={type.fullName}>
              <td>
                <code>{type.fullName}</code>
              </td>
              <td>
                <Text text={type.json} />
              </td>
              <td>
                <code>{type.example}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
