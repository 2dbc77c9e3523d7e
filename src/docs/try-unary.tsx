/** "Try it" for a unary RPC: edit the body, send it as Connect JSON, see the answer. */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { CurlLine } from "./curl-line.js";
import { learnIds } from "./known-ids.js";
import { UnaryOutcomeView } from "./outcome.js";
import type { MethodDoc } from "./reference.js";
import { BodyEditor, useRequestBody } from "./request-body.js";
import { callUnary, type UnaryOutcome } from "./unary-call.js";

export function TryUnary({ method }: { method: MethodDoc }) {
  const body = useRequestBody(method.fullName);
  const [sending, setSending] = useState(false);
  const [outcome, setOutcome] = useState<UnaryOutcome | undefined>();
  /** Answers shown so far (data-answers: tests wait for the next one). */
  const [answers, setAnswers] = useState(0);
  const inFlight = useRef<AbortController | undefined>(undefined);
  useEffect(() => () => inFlight.current?.abort(), []);

  const send = async (e: TargetedSubmitEvent<HTMLFormElement>): Promise<void> => {
    e.preventDefault();
    inFlight.current?.abort();
    const controller = new AbortController();
    inFlight.current = controller;
    setSending(true);
    try {
      const result = await callUnary(method.path, body.text, controller.signal);
      if (result.kind === "response") learnIds(result.json);
      setOutcome(result);
      setAnswers((n) => n + 1);
    } catch {
      return; // aborted by a newer send or by leaving the page
    } finally {
      if (inFlight.current === controller) setSending(false);
    }
  };

  const id = `body-${method.fullName}`;
  return (
    <form class="try" onSubmit={(e) => void send(e)} data-testid="try-it" data-answers={answers}>
      <h4>Try it</h4>
      <BodyEditor id={id} body={body} label={`Request body (${method.input.slice(method.input.lastIndexOf(".") + 1)}, JSON)`} />
      <div class="buttons">
        <button type="submit" disabled={sending}>
          {sending ? "Sending…" : "Send"}
        </button>
        <button type="button" class="quiet" onClick={body.reset} disabled={!body.edited}>
          Reset example
        </button>
        <span class="muted">
          POST <code>{method.path}</code>
        </span>
      </div>
      <CurlLine path={method.path} body={body.text} />
      {outcome !== undefined && <UnaryOutcomeView outcome={outcome} />}
    </form>
  );
}
