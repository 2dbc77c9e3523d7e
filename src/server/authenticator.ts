/**
 * Authentication at the edge (SECURITY.md "Authentication"), when
 * LEASEQUEUE_AUTH_FILE is set: every call of leasequeue.v1 must carry
 * `Authorization: Bearer <token>` of a token in the file (missing or unknown:
 * `unauthenticated`) whose roles include the one its RPC needs (rpc-roles.ts;
 * otherwise `permission_denied`); so must every call of KEDA's
 * externalscaler.ExternalScaler (the `reader` role), except that KEDA cannot
 * send it headers, so its token may come in the request's scalerMetadata
 * instead (service/scaler-metadata.ts). grpc.health.v1 and reflection stay
 * open.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import { ExternalScaler } from "../../gen/ts/externalscaler/externalscaler_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { Logger } from "../logger.js";
import { callerKey, type Caller } from "../service/queue-access.js";
import { RPC_ROLES, SCALER_ROLE, type Role } from "../service/rpc-roles.js";
import { metadataTokenCheckKey } from "../service/scaler-metadata.js";
import { readAuthFile, type TokenEntry } from "./auth-file.js";
import { TOKEN_PATTERN, TokenTable } from "./bearer-tokens.js";

/** `Bearer` (any case, RFC 9110 §11.1), one or more spaces, the token. */
const BEARER = /^bearer +(\S+) *$/i;

/** RFC 6750 §3: a 401 names the scheme the client should use. */
const CHALLENGE = new Headers({ "www-authenticate": 'Bearer realm="leasequeue"' });

/**
 * It runs in the RPC adapter before connect reads the request body
 * (rpc-handler.ts `contextValues`), so a caller without a token gets
 * nothing decompressed or parsed; the one exception is a scaler call
 * without the header, whose request (within the request size limit) is
 * parsed before its handler checks the token in it. What it lets through
 * carries the Caller (service/queue-access.ts), whose queue list the
 * handlers apply.
 *
 * The file is read at start (a bad file refuses to start) and again on
 * `reload()` (SIGHUP): a bad file then keeps the tokens in force and logs
 * why. Neither the token nor the header is ever logged or put in an error.
 */
export class Authenticator {
  readonly #path: string;
  readonly #log: Logger;
  #tokens: TokenTable<Caller>;

  /** Reads the file at `path`; throws AuthFileError when it cannot be read or is not valid. */
  constructor(path: string, log: Logger) {
    this.#path = path;
    this.#log = log;
    this.#tokens = tableOf(readAuthFile(path));
  }

  /** Tokens in force. */
  get size(): number {
    return this.#tokens.size;
  }

  /**
   * Reads the file again. A valid file replaces the tokens at once (calls
   * already running keep the caller they started with); a bad one is
   * logged and the tokens in force stay. Returns whether it was replaced.
   */
  reload(): boolean {
    let entries: TokenEntry[];
    try {
      entries = readAuthFile(this.#path);
    } catch (err) {
      this.#log.error("auth file reload failed; the tokens in force stay", {
        path: this.#path,
        error: (err as Error).message,
        tokens: this.size,
      });
      return false;
    }
    this.#tokens = tableOf(entries);
    this.#log.info("auth file reloaded", { path: this.#path, tokens: this.size });
    return true;
  }

  /**
   * Admits a call before its body is read: sets its caller (callerKey), or
   * throws `unauthenticated` or `permission_denied`. A call of KEDA's scaler
   * without an Authorization header is let through carrying the check of the
   * token in its scalerMetadata (metadataTokenCheckKey), which its handler
   * makes once the request is parsed.
   */
  admit(values: ContextValues, method: DescMethod, authorization: string | undefined): void {
    if (method.parent.typeName === ExternalScaler.typeName && (authorization === undefined || authorization === "")) {
      values.set(metadataTokenCheckKey, (token, field) => this.#metadataCaller(method, token, field));
      return;
    }
    values.set(callerKey, this.authorize(method, authorization));
  }

  /**
   * The caller of a call to `method` with this Authorization header, or
   * undefined for a method that needs none (health, reflection). Throws
   * `unauthenticated` or `permission_denied`.
   */
  authorize(method: DescMethod, authorization: string | undefined): Caller | undefined {
    if (roleOf(method) === null) return undefined;
    if (authorization === undefined || authorization === "") {
      throw new ConnectError('this server requires "Authorization: Bearer <token>"', Code.Unauthenticated, CHALLENGE);
    }
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined || !TOKEN_PATTERN.test(token)) {
      throw new ConnectError('the Authorization header must be "Bearer <token>"', Code.Unauthenticated, CHALLENGE);
    }
    return this.#caller(method, token);
  }

  /** The caller of a scaler call whose token came in its scalerMetadata under `field` (undefined: none there). */
  #metadataCaller(method: DescMethod, token: string | undefined, field: string): Caller {
    if (token === undefined || token === "") {
      throw new ConnectError(
        `this server requires "Authorization: Bearer <token>" or a token in ${field}`,
        Code.Unauthenticated,
        CHALLENGE,
      );
    }
    if (!TOKEN_PATTERN.test(token)) throw new ConnectError(`${field} is not a bearer token`, Code.Unauthenticated, CHALLENGE);
    return this.#caller(method, token);
  }

  #caller(method: DescMethod, token: string): Caller {
    const caller = this.#tokens.lookup(token);
    if (caller === undefined) throw new ConnectError("the bearer token is not known to this server", Code.Unauthenticated, CHALLENGE);
    const role = roleOf(method);
    if (role === undefined || role === null) throw new ConnectError(`no role may call ${method.name}`, Code.PermissionDenied);
    if (!caller.roles.has(role)) {
      const held = [...caller.roles].join(", ");
      throw new ConnectError(`${method.name} needs the role "${role}"; token "${caller.name}" has ${held}`, Code.PermissionDenied);
    }
    return caller;
  }
}

/**
 * The role a call to `method` needs: its entry in RPC_ROLES for
 * leasequeue.v1 (undefined: none may call it, the edge fails closed), the
 * scaler's role for externalscaler.ExternalScaler, null for the services
 * that stay open (health, reflection).
 */
function roleOf(method: DescMethod): Role | undefined | null {
  switch (method.parent.typeName) {
    case LeaseQueueService.typeName:
      return RPC_ROLES[method.name];
    case ExternalScaler.typeName:
      return SCALER_ROLE;
    default:
      return null;
  }
}

function tableOf(entries: TokenEntry[]): TokenTable<Caller> {
  return new TokenTable(
    entries.map((e) => ({
      sha256: e.sha256,
      value: Object.freeze({
        name: e.name,
        roles: new Set(e.roles),
        ...(e.queues === undefined ? {} : { queues: new Set(e.queues) }),
      }),
    })),
  );
}
