/**
 * "Try it" for a server-streaming RPC: open the stream with the body, watch
 * its messages arrive (keepalives counted, not listed), stop it, or see how
 * it ended.
 */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { learnIds } from "./known-ids.js";
import { ErrorView, Json } from "./outcome.js";
import type { MethodDoc } from "./reference.js";
import { BodyEditor, useRequestBody } from "./request-body.js";
import { callServerStream, type StreamEvent } from "./stream-call.js";

/** Messages kept on screen; older ones are dropped. */
const KEEP = 50;

type Ending = Exclude<StreamEvent, { kind: "message" }> | { kind: "stopped" };

function isKeepalive(json: unknown): boolean {
  return typeof json === "object" && json !== null && Object.keys(json).length === 0;
}

export function TryStream({ method }: { method: MethodDoc }) {
  const body = useRequestBody(method.fullName);
  const [messages, setMessages] = useState<Array<{ n: number; json: unknown }>>([]);
  const [keepalives, setKeepalives] = useState(0);
  const [ending, setEnding] = useState<Ending | undefined>();
  const [open, setOpen] = useState(false);
  const current = useRef<AbortController | undefined>(undefined);
  useEffect(() => () => current.current?.abort(), []);

  const start = async (e: TargetedSubmitEvent<HTMLFormElement>): Promise<void> => {
    e.preventDefault();
    current.current?.abort();
    const controller = new AbortController();
    current.current = controller;
    setMessages([]);
    setKeepalives(0);
    setEnding(undefined);
    setOpen(true);
    let n = 0;
    for await (const event of callServerStream(method.path, body.text, controller.signal)) {
      if (controller.signal.aborted) break;
      if (event.kind !== "message") {
        setEnding(event);
        break;
      }
      if (isKeepalive(event.json)) {
        setKeepalives((k) => k + 1);
        continue;
      }
      learnIds(event.json);
      const entry = { n: ++n, json: event.json };
      setMessages((list) => [...list, entry].slice(-KEEP));
    }
    if (current.current === controller) setOpen(false);
  };

  const stop = (): void => {
    current.current?.abort();
    current.current = undefined;
    setOpen(false);
    setEnding({ kind: "stopped" });
  };

  return (
    <form class="try" onSubmit={(e) => void start(e)} data-testid="try-it">
      <h4>Try it (server stream)</h4>
      <BodyEditor
        id={`body-${method.fullName}`}
        body={body}
        label={`Request (${method.input.slice(method.input.lastIndexOf(".") + 1)}, JSON)`}
      />
      <div class="buttons">
        <button type="submit" disabled={open}>
          {open ? "Open…" : "Open stream"}
        </button>
        <button type="button" onClick={stop} disabled={!open}>
          Stop
        </button>
        <button type="button" class="quiet" onClick={body.reset} disabled={!body.edited}>
          Reset example
        </button>
      </div>
      <p class="muted">
        Sent as Connect streaming JSON (<code>application/connect+json</code>); each message is shown as it arrives.
        {method.name === "StreamClaims" &&
          " Leases that arrive here are yours: Complete or Release them below, or they expire after their leaseDuration."}
      </p>
      {(open || ending !== undefined || messages.length > 0) && (
        <div class="outcome" data-testid="stream-outcome" data-open={open ? "true" : "false"}>
          <p class="status">
            {open ? "Open" : "Closed"} · {messages.length} message{messages.length === 1 ? "" : "s"}
            {keepalives > 0 && ` · ${keepalives} keepalive${keepalives === 1 ? "" : "s"}`}
          </p>
          <ol class="stream-messages">
            {messages.map((m) => (
              <li key={m.n} data-testid="stream-message">
                <Json value={m.json} />
              </li>
            ))}
          </ol>
          {ending?.kind === "end" && (ending.error === undefined ? <p class="status ok">Ended: OK</p> : <ErrorView error={ending.error} />)}
          {ending?.kind === "stopped" && <p class="status">Stopped by you.</p>}
          {ending?.kind === "http" && (
            <>
              <p class="status error">HTTP {ending.status}: not a Connect stream</p>
              <pre>{ending.text}</pre>
            </>
          )}
          {ending?.kind === "unreachable" && <p class="status error">No answer from the server: {ending.message}</p>}
        </div>
      )}
    </form>
  );
}
