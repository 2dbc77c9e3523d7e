/**
 * The bearer token for a server with authentication on (LEASEQUEUE_AUTH_FILE):
 * kept in this tab's sessionStorage only (never localStorage, a cookie or the
 * URL), under the same key as the operations console, so a token given to
 * either page serves both in this tab.
 */
const STORAGE_KEY = "leasequeue.token";

const listeners = new Set<() => void>();

export function readToken(): string | null {
  try {
    return sessionStorage.getItem(STORAGE_KEY);
  } catch {
    return null; // storage disabled
  }
}

export function saveToken(token: string): void {
  sessionStorage.setItem(STORAGE_KEY, token);
  for (const listener of listeners) listener();
}

export function forgetToken(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  for (const listener of listeners) listener();
}

/** Calls `listener` when the token is saved or forgotten; returns the unsubscribe function. */
export function onTokenChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The request headers every call sends: Connect's, and the token when there is one. */
export function callHeaders(contentType: string): Record<string, string> {
  const headers: Record<string, string> = { "Content-Type": contentType, "Connect-Protocol-Version": "1" };
  const token = readToken();
  if (token !== null) headers["Authorization"] = `Bearer ${token}`;
  return headers;
}
