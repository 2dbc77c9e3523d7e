/** The bearer token field in the top bar, for a server with LEASEQUEUE_AUTH_FILE (token.ts keeps it). */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { forgetToken, onTokenChange, readToken, saveToken } from "./token.js";

export function TokenField() {
  const [hasToken, setHasToken] = useState(() => readToken() !== null);
  const [draft, setDraft] = useState("");
  useEffect(() => onTokenChange(() => setHasToken(readToken() !== null)), []);

  const use = (e: TargetedSubmitEvent<HTMLFormElement>): void => {
    e.preventDefault();
    const token = draft.trim();
    if (token === "") return;
    saveToken(token);
    setDraft("");
  };

  if (hasToken) {
    return (
      <div class="token-field" data-testid="token-field" data-token="set">
        <span class="muted">Bearer token set (this tab only)</span>
        <button type="button" class="quiet" onClick={forgetToken}>
          Forget token
        </button>
      </div>
    );
  }
  return (
    <form class="token-field" onSubmit={use} data-testid="token-field" data-token="none">
      <label for="token-input">Bearer token</label>
      <input
        id="token-input"
        type="password"
        autocomplete="off"
        spellcheck={false}
        placeholder="only with LEASEQUEUE_AUTH_FILE"
        value={draft}
        onInput={(e) => setDraft(e.currentTarget.value)}
      />
      <button type="submit">Use</button>
    </form>
  );
}
