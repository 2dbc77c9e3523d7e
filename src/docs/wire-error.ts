/**
 * A Connect error as it travels in JSON (a unary error body, or the `error`
 * of a stream's end message): the code, the message and the details, each
 * with its type, its protobuf bytes in base64 and, from connect-es servers,
 * a `debug` copy as JSON (the server always sends it for ErrorInfo and
 * BadRequest).
 */
export interface WireError {
  code: string;
  message: string;
  details: WireErrorDetail[];
}

export interface WireErrorDetail {
  /** e.g. "google.rpc.BadRequest" */
  type: string;
  value: string;
  debug?: unknown;
}

/** A WireError read from parsed JSON; undefined when the value is not one. */
export function readWireError(json: unknown): WireError | undefined {
  if (typeof json !== "object" || json === null) return undefined;
  const { code, message, details } = json as Record<string, unknown>;
  if (typeof code !== "string") return undefined;
  return {
    code,
    message: typeof message === "string" ? message : "",
    details: Array.isArray(details) ? details.filter(isDetail) : [],
  };
}

function isDetail(value: unknown): value is WireErrorDetail {
  return typeof value === "object" && value !== null && typeof (value as WireErrorDetail).type === "string";
}

/** google.rpc.BadRequest's field violations, from the details' debug JSON. */
export function fieldViolations(error: WireError): Array<{ field: string; description: string }> {
  return error.details
    .filter((d) => d.type === "google.rpc.BadRequest")
    .flatMap((d) => (d.debug as { fieldViolations?: Array<{ field?: string; description?: string }> })?.fieldViolations ?? [])
    .map((v) => ({ field: v.field ?? "", description: v.description ?? "" }));
}

/** google.rpc.ErrorInfo's reason and metadata, from the details' debug JSON. */
export function errorInfos(error: WireError): Array<{ reason: string; domain: string; metadata: Record<string, string> }> {
  return error.details
    .filter((d) => d.type === "google.rpc.ErrorInfo")
    .map((d) => d.debug as { reason?: string; domain?: string; metadata?: Record<string, string> } | undefined)
    .map((info) => ({ reason: info?.reason ?? "", domain: info?.domain ?? "", metadata: info?.metadata ?? {} }));
}
