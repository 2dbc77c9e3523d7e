/**
 * Proto comments and table cells as the page shows them: paragraphs split
 * at blank lines, `backticks` as code, and web addresses as links. Never
 * HTML: everything is text nodes.
 */
import type { ComponentChildren } from "preact";

const INLINE = /(`[^`]+`|https?:\/\/[^\s)]+[^\s).,;:])/;

/** One line or cell of text with its code spans and links. */
export function Text({ text }: { text: string }) {
  const parts: ComponentChildren[] = text.split(INLINE).map((part, i) => {
    if (i % 2 === 0) return part;
    if (part.startsWith("`")) return <code key={i}>{part.slice(1, -1)}</code>;
    return (
      <a key={i} href={part} rel="noreferrer">
        {part}
      </a>
    );
  });
  return <>{parts}</>;
}

/** A proto comment: its paragraphs; nothing when it is empty. */
export function Comment({ text, class: className }: { text: string; class?: string }) {
  if (text === "") return null;
  return (
    <div class={className ?? "comment"}>
      {text.split(/\n\s*\n/).map((paragraph, i) => (
        <p key={i}>
          <Text text={paragraph.replace(/\s*\n\s*/g, " ")} />
        </p>
      ))}
    </div>
  );
}
