/**
 * `leasequeue hash-token`: prints an entry for the auth file
 * (server/auth-file.ts), for a new random token or for one read from stdin.
 *
 * The token never comes from the command line, where `ps` and shell history
 * would show it: either the command generates one (and prints it once,
 * above the entry), or `--token-stdin` reads it from standard input (then
 * only the entry is printed, for scripts).
 */
import { parseArgs } from "node:util";
import { TOKEN_NAME, type TokenEntry } from "../server/auth-file.js";
import { generateToken, hashToken, MIN_TOKEN_CHARS, TOKEN_PATTERN } from "../server/bearer-tokens.js";
import { BOUNDS } from "../domain/request-bounds.js";
import { isRole, ROLES, type Role } from "../service/rpc-roles.js";

export const HASH_TOKEN_USAGE = `leasequeue hash-token --name NAME --roles ROLE[,ROLE...] [--queues QUEUE[,QUEUE...]] [--token-stdin]
                               print an entry for LEASEQUEUE_AUTH_FILE: for a new random token
                               (printed once, above the entry), or with --token-stdin for a token
                               read from standard input. Roles: ${ROLES.join(", ")}`;

export class UsageError extends Error {
  override name = "UsageError";
}

export interface HashTokenIo {
  /** All of standard input, read only with --token-stdin. */
  readStdin: () => Promise<string>;
  write: (text: string) => void;
}

/** Runs the command; throws UsageError for bad arguments or a bad token. */
export async function hashTokenCommand(args: string[], io: HashTokenIo): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      roles: { type: "string" },
      queues: { type: "string" },
      "token-stdin": { type: "boolean" },
    },
  });
  if (positionals.length > 0) {
    // Not echoed: it may be a token someone tried to pass.
    throw new UsageError("hash-token takes no arguments; a token is read with --token-stdin, never from the command line");
  }
  const entry = entryOf(values);
  if (values["token-stdin"]) {
    const token = tokenFromStdin(await io.readStdin());
    io.write(`${JSON.stringify(withHash(entry, token))}\n`);
    return;
  }
  const token = generateToken();
  io.write(
    `# token for "${entry.name}": give it to the client; it is shown only now and stored nowhere\n${token}\n` +
      `# its entry for the "tokens" list of LEASEQUEUE_AUTH_FILE\n${JSON.stringify(withHash(entry, token))}\n`,
  );
}

/** The entry in the file's key order: name, sha256, roles, queues. */
function withHash(entry: Omit<TokenEntry, "sha256">, token: string): TokenEntry {
  return {
    name: entry.name,
    sha256: hashToken(token),
    roles: entry.roles,
    ...(entry.queues === undefined ? {} : { queues: entry.queues }),
  };
}

function entryOf(values: { name?: string; roles?: string; queues?: string }): Omit<TokenEntry, "sha256"> {
  if (values.name === undefined || !TOKEN_NAME.test(values.name)) {
    throw new UsageError("--name is required: 1-64 characters of [A-Za-z0-9._:@-], starting with a letter or digit");
  }
  if (values.roles === undefined) throw new UsageError(`--roles is required: a comma-separated list of ${ROLES.join(", ")}`);
  const roles = commaList(values.roles).map((r): Role => {
    if (!isRole(r)) throw new UsageError(`--roles: "${r}" is not a role; use ${ROLES.join(", ")}`);
    return r;
  });
  const entry: Omit<TokenEntry, "sha256"> = { name: values.name, roles: [...new Set(roles)] };
  if (values.queues !== undefined) {
    const queues = commaList(values.queues);
    for (const q of queues) if (!BOUNDS.name.test(q)) throw new UsageError(`--queues: "${q}" is not a queue name`);
    entry.queues = [...new Set(queues)];
  }
  return entry;
}

function commaList(raw: string): string[] {
  return raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
}

function tokenFromStdin(input: string): string {
  const token = input.replace(/\r?\n$/, "");
  if (token === "") throw new UsageError("--token-stdin: standard input was empty");
  if (!TOKEN_PATTERN.test(token)) {
    throw new UsageError("--token-stdin: a token is one line of A-Z a-z 0-9 - . _ ~ + / (then = padding), as a Bearer token must be");
  }
  if (token.length < MIN_TOKEN_CHARS) {
    throw new UsageError(
      `--token-stdin: the token has ${token.length} characters; use at least ${MIN_TOKEN_CHARS} random ones (or let hash-token make one)`,
    );
  }
  return token;
}
