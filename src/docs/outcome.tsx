/** What a call answered: the response message, or the coded error with its details. */
import type { UnaryOutcome } from "./unary-call.js";
import { errorInfos, fieldViolations, type WireError } from "./wire-error.js";

export function Json({ value, testId }: { value: unknown; testId?: string }) {
  return (
    <pre class="json" data-testid={testId}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

function AuthHint({ code }: { code: string }) {
  if (code === "unauthenticated") {
    return <p class="hint">This server requires a bearer token: enter one under “Bearer token” at the top of the page.</p>;
  }
  if (code === "permission_denied") {
    return <p class="hint">The token lacks this RPC's role or the queue: see the role above, and the token's queues.</p>;
  }
  return null;
}

export function ErrorView({ error, status }: { error: WireError; status?: number }) {
  const violations = fieldViolations(error);
  const infos = errorInfos(error);
  return (
    <div class="error-view">
      <p class="status error">
        {status !== undefined && <span>HTTP {status} · </span>}
        <code data-testid="error-code">{error.code}</code>
      </p>
      <p data-testid="error-message">{error.message || "(no message)"}</p>
      {violations.length > 0 && (
        <ul class="violations" aria-label="Field violations (google.rpc.BadRequest)">
          {violations.map((v, i) => (
            <li key={i} data-testid="field-violation" data-field={v.field}>
              <code>{v.field}</code>: {v.description}
            </li>
          ))}
        </ul>
      )}
      {infos.map((info, i) => (
        <p key={i} data-testid="error-reason" data-reason={info.reason}>
          ErrorInfo <code>{info.reason}</code>
          {Object.entries(info.metadata).map(([key, value]) => (
            <span key={key} class="muted">
              {" "}
              {key}=<code>{value}</code>
            </span>
          ))}
        </p>
      ))}
      <AuthHint code={error.code} />
      {error.details.length > 0 && (
        <details>
          <summary>Details as sent ({error.details.length})</summary>
          <Json value={error.details} />
        </details>
      )}
    </div>
  );
}

export function UnaryOutcomeView({ outcome }: { outcome: UnaryOutcome }) {
  return (
    <div class={`outcome outcome-${outcome.kind}`} data-testid="outcome" data-outcome={outcome.kind}>
      {outcome.kind === "response" && (
        <>
          <p class="status ok">HTTP {outcome.status} · OK</p>
          <Json value={outcome.json} testId="response-body" />
        </>
      )}
      {outcome.kind === "error" && <ErrorView error={outcome.error} status={outcome.status} />}
      {outcome.kind === "http" && (
        <>
          <p class="status error">HTTP {outcome.status}: not a Connect answer</p>
          <pre>{outcome.text}</pre>
        </>
      )}
      {outcome.kind === "unreachable" && <p class="status error">No answer from the server: {outcome.message}</p>}
    </div>
  );
}
