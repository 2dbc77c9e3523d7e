/** Asks for the access token when the server requires one (auth.ts), and lets the user forget it. */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { consoleAuth, type TokenNeed } from "./auth.js";

function useAuthState(): { need: TokenNeed | undefined; hasToken: boolean } {
  const read = () => ({ need: consoleAuth.need, hasToken: consoleAuth.token !== null });
  const [state, setState] = useState(read);
  useEffect(() => {
    setState(read());
    return consoleAuth.onChange(() => setState(read()));
  }, []);
  return state;
}

export function TokenPrompt() {
  const { need } = useAuthState();
  const [draft, setDraft] = useState("");
  if (need === undefined) return null;
  const onSubmit = (e: TargetedSubmitEvent<HTMLFormElement>): void => {
    e.preventDefault();
    const token = draft.trim();
    if (token === "") return;
    setDraft("");
    consoleAuth.use(token);
  };
  return (
    <section class="notice token-prompt" role="dialog" aria-labelledby="token-title" data-testid="token-prompt">
      <h2 id="token-title">Access token required</h2>
      <p data-testid="token-reason">
        {need.reason === "refused"
          ? "The server refused that token: it is unknown or was revoked. Enter another."
          : "This server requires a bearer token for every API call."}{" "}
        The console keeps it in this tab's session storage only and sends it with each call.
      </p>
      <form class="buttons" onSubmit={onSubmit}>
        <div class="field">
          <label for="token-input">Access token</label>
          <input
            id="token-input"
            type="password"
            autocomplete="off"
            spellcheck={false}
            required
            value={draft}
            onInput={(e) => setDraft(e.currentTarget.value)}
          />
        </div>
        <button type="submit">Use token</button>
      </form>
    </section>
  );
}

export function ForgetToken() {
  const { hasToken } = useAuthState();
  if (!hasToken) return null;
  return (
    <button type="button" class="quiet" onClick={() => consoleAuth.forget()} data-testid="forget-token">
      Forget token
    </button>
  );
}
