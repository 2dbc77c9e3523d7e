/**
 * Headers between Node's objects and fetch's `Headers`, converted the way
 * connect-node converts them, for the gRPC unary path (grpc-unary.ts).
 */
import type * as http2 from "node:http2";

/**
 * The request's headers as handlers read them. Handlers ask for one or two
 * (Idempotency-Key, Content-Type): get() and has() answer those from Node's
 * header object, as `Headers` would (repeated values joined; there is no
 * whitespace to trim, since HTTP/2 refuses values that start or end with
 * it, RFC 9113 §8.2.1); anything else (iteration, changes, names that are not plain tokens, which
 * `Headers` refuses) goes to a real `Headers` made from them on first use,
 * as connect-node makes it for every call.
 */
export class RequestHeaders implements Headers {
  readonly #node: http2.IncomingHttpHeaders;
  #headers: Headers | undefined;

  constructor(node: http2.IncomingHttpHeaders) {
    this.#node = node;
  }

  #all(): Headers {
    return (this.#headers ??= webHeadersOf(this.#node));
  }

  get(name: string): string | null {
    if (this.#headers !== undefined || !PLAIN_HEADER_NAME.test(name)) return this.#all().get(name);
    return headerValue(this.#node[name.toLowerCase()]);
  }

  has(name: string): boolean {
    if (this.#headers !== undefined || !PLAIN_HEADER_NAME.test(name)) return this.#all().has(name);
    return this.#node[name.toLowerCase()] !== undefined;
  }

  append(name: string, value: string): void {
    this.#all().append(name, value);
  }

  delete(name: string): void {
    this.#all().delete(name);
  }

  set(name: string, value: string): void {
    this.#all().set(name, value);
  }

  getSetCookie(): string[] {
    return this.#all().getSetCookie();
  }

  forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    this.#all().forEach((value, key) => callback.call(thisArg, value, key, this));
  }

  keys(): ReturnType<Headers["keys"]> {
    return this.#all().keys();
  }

  values(): ReturnType<Headers["values"]> {
    return this.#all().values();
  }

  entries(): ReturnType<Headers["entries"]> {
    return this.#all().entries();
  }

  [Symbol.iterator](): ReturnType<Headers["entries"]> {
    return this.#all()[Symbol.iterator]();
  }
}

/** A header name `Headers` accepts (an RFC 9110 token); a pseudo-header is not one. */
const PLAIN_HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** One header of a request as a string (repeated values joined), or null when absent. */
export function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return typeof value === "string" ? value : value.join(", ");
}

/** The request's headers as connect-node gives them to handlers (pseudo-headers dropped). */
function webHeadersOf(nodeHeaders: http2.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(nodeHeaders)) {
    if (name.startsWith(":") || value === undefined) continue;
    if (typeof value === "string") headers.append(name, value);
    else for (const v of value) headers.append(name, v);
  }
  return headers;
}

/** Headers as Node writes them, the way connect-node converts them. */
export function nodeHeadersOf(headers: Headers): http2.OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  headers.forEach((value, key) => {
    const existing = out[key];
    if (existing === undefined) out[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[key] = [existing, value];
  });
  return out;
}

/** Makes `to` hold what `from` holds, and nothing else. */
export function replaceHeaders(to: Headers, from: Headers): void {
  for (const key of [...to.keys()]) to.delete(key);
  from.forEach((value, key) => to.set(key, value));
}
