/**
 * Which bound applies to a field: the bounds table names JSON fields, and a
 * bound holds for them in the messages a client sends (the requests and
 * every message they contain), not in responses.
 */
import type { ApiReference, BoundDoc } from "./reference.js";

const requestSides = new WeakMap<ApiReference, Set<string>>();

/** Full names of every message that a request may contain (requests included). */
function requestSide(reference: ApiReference): Set<string> {
  let found = requestSides.get(reference);
  if (found !== undefined) return found;
  found = new Set();
  const visit = (name: string): void => {
    if (found.has(name)) return;
    const message = reference.messages.find((m) => m.fullName === name);
    if (message === undefined) return;
    found.add(name);
    for (const field of message.fields) if (field.type.kind === "message") visit(field.type.name);
  };
  for (const service of reference.services) for (const method of service.methods) visit(method.input);
  requestSides.set(reference, found);
  return found;
}

/** The bound of a field of a message, when the message is sent by clients and the table names the field. */
export function boundOf(reference: ApiReference, messageName: string, jsonName: string): BoundDoc | undefined {
  if (!requestSide(reference).has(messageName)) return undefined;
  return reference.bounds.find((b) => b.fields.includes(jsonName));
}
