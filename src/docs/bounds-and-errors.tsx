/** The bounds every request is validated against, and the errors the server answers with. */
import type { ApiReference } from "./reference.js";
import { Text } from "./text.js";

export function BoundsSection({ reference }: { reference: ApiReference }) {
  return (
    <section id="bounds">
      <h2>Bounds and defaults</h2>
      <p>
        A number left at 0 takes its default; a Duration that is present must be in bounds (<code>"0s"</code> for <code>leaseDuration</code>{" "}
        is refused); negative numbers are never defaults. Durations are written here in units; in JSON they are seconds, so <code>12h</code>{" "}
        is <code>"43200s"</code>. A value out of bounds is <code>invalid_argument</code> naming the field.
      </p>
      <table class="fields">
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Bound</th>
            <th scope="col">Default</th>
          </tr>
        </thead>
        <tbody>
          {reference.bounds.map((row, i) => (
            <tr key={i} data-bound={row.fields.join(",") || row.subject}>
              <td>{row.fields.length === 0 ? row.subject : row.fields.map((f, j) => <code key={f}>{j > 0 ? `, ${f}` : f}</code>)}</td>
              <td>
                <Text text={row.bound} />
              </td>
              <td>
                <Text text={row.default} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function ErrorsSection({ reference }: { reference: ApiReference }) {
  return (
    <section id="errors">
      <h2>Errors</h2>
      <p>
        Every error has a code and a message naming the field or the reason. Connect answers it with the HTTP status below and a JSON body{" "}
        <code>{'{"code": ..., "message": ..., "details": [...]}'}</code>; each detail has its <code>type</code>, its protobuf{" "}
        <code>value</code> in base64 and a <code>debug</code> copy in JSON. gRPC carries the same in the{" "}
        <code>grpc-status-details-bin</code> trailer. <code>ErrorInfo.domain</code> is always <code>leasequeue</code>.
      </p>
      <table class="fields">
        <thead>
          <tr>
            <th scope="col">Situation</th>
            <th scope="col">Code (HTTP for Connect)</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {reference.errors.map((row, i) => (
            <tr key={i} data-error-code={row.code} data-error-reasons={row.reasons.join(" ")}>
              <td>
                <Text text={row.situation} />
              </td>
              <td>
                <code>{row.code}</code> <Text text={row.status} />
              </td>
              <td>
                <Text text={row.detail} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
