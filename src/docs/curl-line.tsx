/** The same call as a curl command, to copy into a shell. */
import { readToken } from "./token.js";

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

export function CurlLine({ path, body }: { path: string; body: string }) {
  let compact = body;
  try {
    compact = JSON.stringify(JSON.parse(body));
  } catch {
    // Not JSON: shown as typed, as it would be sent.
  }
  const auth = readToken() === null ? "" : ` -H "Authorization: Bearer $TOKEN"`;
  const command = `curl -s ${location.origin}${path} -H 'Content-Type: application/json'${auth} -d ${shellQuote(compact)}`;
  return (
    <details class="curl">
      <summary>As curl</summary>
      <pre>{command}</pre>
    </details>
  );
}
