/**
 * The editable request body of one RPC: its example (with the ids seen last,
 * known-ids.ts) until the user types, then what the user typed; "Reset"
 * brings the example back.
 */
import { useEffect, useState } from "preact/hooks";
import { exampleBody } from "./examples.js";
import { knownIds, onKnownIdsChange } from "./known-ids.js";

export interface RequestBody {
  text: string;
  edited: boolean;
  set(text: string): void;
  reset: () => void;
}

export function useRequestBody(fullName: string): RequestBody {
  const [ids, setIds] = useState(knownIds);
  const [edited, setEdited] = useState<string | null>(null);
  useEffect(() => onKnownIdsChange(() => setIds(knownIds())), []);
  return {
    text: edited ?? exampleBody(fullName, ids),
    edited: edited !== null,
    set: setEdited,
    reset: () => setEdited(null),
  };
}

export function BodyEditor({ id, body, label }: { id: string; body: RequestBody; label: string }) {
  const lines = body.text.split("\n").length;
  return (
    <div class="body-editor">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        class="mono"
        spellcheck={false}
        autocomplete="off"
        rows={Math.min(Math.max(lines, 3), 18)}
        value={body.text}
        onInput={(e) => body.set(e.currentTarget.value)}
      />
    </div>
  );
}
