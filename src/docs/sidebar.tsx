/** The table of contents, with a filter: every RPC, message and enum by name. */
import { useState } from "preact/hooks";
import type { ApiReference } from "./reference.js";
import { KIND_LABEL } from "./method-section.js";

interface Entry {
  href: string;
  label: string;
  note?: string;
}

function Group({ title, href, entries, filter }: { title: string; href: string; entries: Entry[]; filter: string }) {
  const shown = entries.filter((e) => e.label.toLowerCase().includes(filter));
  if (filter !== "" && shown.length === 0) return null;
  return (
    <li>
      <a href={href} class="group">
        {title}
      </a>
      <ul>
        {shown.map((e) => (
          <li key={e.href}>
            <a href={e.href}>{e.label}</a>
            {e.note !== undefined && <span class="muted"> {e.note}</span>}
          </li>
        ))}
      </ul>
    </li>
  );
}

export function Sidebar({ reference }: { reference: ApiReference }) {
  const [filter, setFilter] = useState("");
  const f = filter.trim().toLowerCase();
  return (
    <nav class="sidebar" aria-label="Contents">
      <input
        type="search"
        aria-label="Filter RPCs, messages and enums"
        placeholder="Filter…"
        value={filter}
        onInput={(e) => setFilter(e.currentTarget.value)}
      />
      <ul>
        {f === "" && (
          <li>
            <a href="#calling" class="group">
              Calling the API
            </a>
          </li>
        )}
        {reference.services.map((service) => (
          <Group
            key={service.fullName}
            title={service.name}
            href={`#${service.fullName}`}
            filter={f}
            entries={service.methods.map((m) => ({
              href: `#${m.fullName}`,
              label: m.name,
              note: m.kind === "unary" ? undefined : KIND_LABEL[m.kind],
            }))}
          />
        ))}
        <Group
          title="Messages"
          href="#messages"
          filter={f}
          entries={reference.messages.map((m) => ({ href: `#${m.fullName}`, label: m.name }))}
        />
        <Group title="Enums" href="#enums" filter={f} entries={reference.enums.map((e) => ({ href: `#${e.fullName}`, label: e.name }))} />
        {f === "" && (
          <>
            <li>
              <a href="#json-mapping" class="group">
                JSON mapping
              </a>
            </li>
            <li>
              <a href="#bounds" class="group">
                Bounds and defaults
              </a>
            </li>
            <li>
              <a href="#errors" class="group">
                Errors
              </a>
            </li>
          </>
        )}
      </ul>
    </nav>
  );
}
