/**
 * The job id and lease the page saw last in a response (Submit's job,
 * Claim's or StreamClaims' lease), so that the example bodies of the calls
 * that need them (GetJob, Complete, ...) carry real values: Submit, Claim,
 * Complete in a row work without copying anything by hand.
 */
export interface KnownIds {
  /** The job of the last response that named one. */
  jobId?: string;
  /** The last lease handed out. */
  lease?: { jobId: string; leaseToken: string };
}

let known: KnownIds = {};
const listeners = new Set<() => void>();

export function knownIds(): KnownIds {
  return known;
}

export function onKnownIdsChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

interface LeaseJson {
  job?: { id?: unknown };
  leaseToken?: unknown;
}

function leaseOf(value: LeaseJson | undefined): KnownIds["lease"] {
  const jobId = value?.job?.id;
  const leaseToken = value?.leaseToken;
  return typeof jobId === "string" && typeof leaseToken === "string" ? { jobId, leaseToken } : undefined;
}

/** Notes the ids in a response message (of any RPC). */
export function learnIds(json: unknown): void {
  if (typeof json !== "object" || json === null) return;
  const message = json as { job?: { id?: unknown }; lease?: LeaseJson; leases?: LeaseJson[]; results?: Array<{ job?: { id?: unknown } }> };
  const lease = leaseOf(message.lease) ?? leaseOf(message.leases?.[0]);
  const jobId = lease?.jobId ?? message.job?.id ?? message.results?.[0]?.job?.id;
  if (lease === undefined && typeof jobId !== "string") return;
  known = { jobId: typeof jobId === "string" ? jobId : known.jobId, lease: lease ?? known.lease };
  for (const listener of listeners) listener();
}
