/**
 * LeaseQueue API reference: entry point. Bundled by scripts/build-docs.mjs
 * into dist/docs/ and served at /docs on the API port by
 * src/server/docs-files.ts; renders /docs/reference.json, which the same
 * build generated from the protos' comments.
 */
import "./docs.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { BoundsSection, ErrorsSection } from "./bounds-and-errors.js";
import { EnumSection, JsonMappingSection, MessageSection } from "./message-sections.js";
import { MethodSection } from "./method-section.js";
import type { ApiReference } from "./reference.js";
import { Sidebar } from "./sidebar.js";
import { Comment } from "./text.js";
import { TokenField } from "./token-field.js";

function Calling() {
  return (
    <section id="calling">
      <h1>LeaseQueue API reference</h1>
      <p>
        One port speaks gRPC, gRPC-Web and the Connect protocol. With Connect, every unary RPC is a POST of JSON to{" "}
        <code>/&lt;service&gt;/&lt;Rpc&gt;</code> with <code>Content-Type: application/json</code>, and answers 200 with the response
        message, or an error status with <code>{'{"code", "message", "details"}'}</code>. Server streams use{" "}
        <code>application/connect+json</code> framing. The forms below send exactly that from this page; edit a body and press Send. The
        examples pick up the job id and lease token of your last Submit, Claim or StreamClaims, so Submit, Claim and Complete work in a row.
      </p>
      <p>
        Generated from <code>proto/leasequeue/v1/leasequeue.proto</code> and its comments when the server was built;{" "}
        <a href="/docs/reference.json">reference.json</a> holds the same for tools. gRPC clients can also use server reflection when it is
        on. The <a href="/">operations console</a> shows the queues and jobs these calls change.
      </p>
    </section>
  );
}

function App({ reference }: { reference: ApiReference }) {
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href="/docs">
          LeaseQueue <span class="muted">API reference</span>
        </a>
        <nav aria-label="Pages">
          <a href="/">Console</a>
        </nav>
        <TokenField />
      </header>
      <div class="layout">
        <Sidebar reference={reference} />
        <main id="main" tabIndex={-1}>
          <Calling />
          {reference.services.map((service) => (
            <section class="service" id={service.fullName} key={service.fullName} data-service={service.fullName}>
              <h2>
                {service.name} <span class="muted kind">{service.fullName}</span>
              </h2>
              <Comment text={service.comment} />
              {service.methods.map((method) => (
                <MethodSection key={method.fullName} reference={reference} method={method} />
              ))}
            </section>
          ))}
          <section id="messages">
            <h2>Messages</h2>
            {reference.messages.map((message) => (
              <MessageSection key={message.fullName} reference={reference} message={message} />
            ))}
          </section>
          <section id="enums">
            <h2>Enums</h2>
            {reference.enums.map((doc) => (
              <EnumSection key={doc.fullName} doc={doc} />
            ))}
          </section>
          <JsonMappingSection reference={reference} />
          <BoundsSection reference={reference} />
          <ErrorsSection reference={reference} />
        </main>
      </div>
    </>
  );
}

function Failed({ message }: { message: string }) {
  return (
    <main id="main" class="load-failed" data-testid="load-failed">
      <h1>LeaseQueue API reference</h1>
      <p>
        The reference could not be loaded: {message}. Reload the page; if it persists, rebuild with <code>npm run build</code> and restart
        the server.
      </p>
    </main>
  );
}

function Root() {
  const [state, setState] = useState<{ reference?: ApiReference; error?: string }>({});
  useEffect(() => {
    fetch("/docs/reference.json")
      .then((res) => (res.ok ? (res.json() as Promise<ApiReference>) : Promise.reject(new Error(`HTTP ${res.status}`))))
      .then((reference) => setState({ reference }))
      .catch((err: unknown) => setState({ error: err instanceof Error ? err.message : String(err) }));
  }, []);
  useEffect(() => {
    // The page was opened at an anchor (/docs#leasequeue.v1.Job): scroll there once it exists.
    if (state.reference !== undefined && location.hash.length > 1) {
      document.getElementById(decodeURIComponent(location.hash.slice(1)))?.scrollIntoView();
    }
  }, [state.reference]);
  if (state.error !== undefined) return <Failed message={state.error} />;
  if (state.reference === undefined) return <p class="loading">Loading the reference…</p>;
  return <App reference={state.reference} />;
}

render(<Root />, document.getElementById("app")!);
