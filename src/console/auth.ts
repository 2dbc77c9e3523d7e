/**
 * The console's access token, for a server that requires one
 * (LEASEQUEUE_AUTH_FILE). The console asks for it only when a call is
 * answered `unauthenticated`, keeps it in this tab's sessionStorage only
 * (gone with the tab; never localStorage, a cookie or the URL), and sends it
 * as `Authorization: Bearer <token>` with every call, streams included.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";

const STORAGE_KEY = "leasequeue.token";

/** Why the console needs a token: none was given yet, or the server refused the one it sent. */
export type TokenNeed = { reason: "required" } | { reason: "refused" };

class ConsoleAuth {
  #need: TokenNeed | undefined;
  readonly #listeners = new Set<() => void>();
  readonly #tokenListeners = new Set<() => void>();

  /** The token in use, or null. */
  get token(): string | null {
    try {
      return sessionStorage.getItem(STORAGE_KEY);
    } catch {
      return null; // storage disabled: the console then asks on every load
    }
  }

  /** Set while the console waits for the user to give a token. */
  get need(): TokenNeed | undefined {
    return this.#need;
  }

  /** The user gave a token: use it from now on. */
  use(token: string): void {
    sessionStorage.setItem(STORAGE_KEY, token);
    this.#need = undefined;
    this.#changed();
    for (const listener of this.#tokenListeners) listener();
  }

  /** The user wants to stop using the token. */
  forget(): void {
    sessionStorage.removeItem(STORAGE_KEY);
    this.#changed();
    for (const listener of this.#tokenListeners) listener();
  }

  /** A call that carried `sent` (or no token) was answered `unauthenticated`. */
  refused(sent: string | null): void {
    const current = this.token;
    // A call that left before the current token was given says nothing about it.
    if (sent !== current) return;
    if (sent !== null) sessionStorage.removeItem(STORAGE_KEY);
    const reason = sent === null && this.#need?.reason !== "refused" ? "required" : "refused";
    if (this.#need?.reason === reason) return;
    this.#need = { reason };
    this.#changed();
  }

  /** Calls `listener` when the need or the token changes; returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Calls `listener` when a token is given or forgotten (to retry what failed). */
  onToken(listener: () => void): () => void {
    this.#tokenListeners.add(listener);
    return () => this.#tokenListeners.delete(listener);
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}

export const consoleAuth = new ConsoleAuth();

/** Adds the token to every call and reports `unauthenticated` answers, of unary calls and streams alike. */
export const authInterceptor: Interceptor = (next) => async (req) => {
  const sent = consoleAuth.token;
  if (sent !== null) req.header.set("Authorization", `Bearer ${sent}`);
  const check = (err: unknown): void => {
    if (ConnectError.from(err).code === Code.Unauthenticated) consoleAuth.refused(sent);
  };
  try {
    const res = await next(req);
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (err) {
          check(err);
          throw err;
        }
      })(),
    };
  } catch (err) {
    check(err);
    throw err;
  }
};
