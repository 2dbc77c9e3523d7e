/** One RPC: how it is called, what it takes and returns, its comment, and a form to try it. */
import { exampleBody } from "./examples.js";
import type { ApiReference, MethodDoc, MethodKind } from "./reference.js";
import { FieldTable } from "./message-sections.js";
import { Comment } from "./text.js";
import { TryStream } from "./try-stream.js";
import { TryUnary } from "./try-unary.js";
import { shortName } from "./types.js";

export const KIND_LABEL: Readonly<Record<MethodKind, string>> = {
  unary: "unary",
  server_streaming: "server stream",
  client_streaming: "client stream",
  bidi_streaming: "bidi stream",
};

function TypeLink({ reference, name }: { reference: ApiReference; name: string }) {
  return (
    <a href={`#${name}`}>
      <code>{shortName(reference, name)}</code>
    </a>
  );
}

function NoForm({ method }: { method: MethodDoc }) {
  return (
    <div class="notice" data-testid="no-form">
      <p>
        {method.name} streams its requests too: that needs HTTP/2 and a client that can send while it receives, which a browser page cannot
        do with <code>fetch</code>. Use it from the worker SDK or generated gRPC stubs; from this page, StreamClaims and Acknowledge do the
        same work one call at a time. Its first request message looks like:
      </p>
      <pre>{exampleBody(method.fullName, {})}</pre>
    </div>
  );
}

export function MethodSection({ reference, method }: { reference: ApiReference; method: MethodDoc }) {
  const input = reference.messages.find((m) => m.fullName === method.input);
  return (
    <section class="rpc" id={method.fullName} data-method={method.fullName}>
      <h3>
        {method.name} <span class={`kind kind-${method.kind}`}>{KIND_LABEL[method.kind]}</span>
      </h3>
      <p class="signature">
        <code>POST {method.path}</code> · {method.kind === "client_streaming" || method.kind === "bidi_streaming" ? "stream of " : ""}
        <TypeLink reference={reference} name={method.input} /> →{" "}
        {method.kind === "server_streaming" || method.kind === "bidi_streaming" ? "stream of " : ""}
        <TypeLink reference={reference} name={method.output} />
        {method.role !== undefined && (
          <>
            {" "}
            · role <code data-testid="role">{method.role}</code>
          </>
        )}
      </p>
      <Comment text={method.comment} />
      {input !== undefined && (
        <details class="request-fields">
          <summary>
            Request fields ({input.fields.length}): <code>{input.name}</code>
          </summary>
          <FieldTable reference={reference} message={input} />
        </details>
      )}
      {method.kind === "unary" && <TryUnary method={method} />}
      {method.kind === "server_streaming" && <TryStream method={method} />}
      {(method.kind === "bidi_streaming" || method.kind === "client_streaming") && <NoForm method={method} />}
    </section>
  );
}
