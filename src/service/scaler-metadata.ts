/**
 * What a KEDA ScaledObject's trigger says to LeaseQueue's external scaler
 * (docs/operations.md "Autoscaling workers"): the keys of
 * ScaledObjectRef.scalerMetadata, validated like any request field
 * (invalid_argument naming the key), and the bearer token KEDA can pass
 * there.
 */
import { createContextKey } from "@connectrpc/connect";
import { invalidArgument } from "./errors.js";
import type { Caller } from "./queue-access.js";
import * as v from "./validate.js";

/**
 * The key that carries the bearer token (its value as KEDA sends it: the token itself).
 *
 * KEDA does not send TriggerAuthentication parameters to an external
 * scaler (it keeps `caCert`, `tlsClientCert` and `tlsClientKey` for its own
 * TLS connection):
 * a secret reaches the scaler through a key whose name ends in `FromEnv`,
 * whose value KEDA replaces with that environment variable of the scaled
 * workload's container before it calls, which is why the token's key is
 * `tokenFromEnv`.
 */
export const SCALER_TOKEN_KEY = "tokenFromEnv";

export const DEFAULT_TARGET_PENDING_PER_REPLICA = 10;

/** targetPendingPerReplica's bounds: the jobs one replica should have waiting for it. */
export const TARGET_PENDING_PER_REPLICA_BOUNDS = [1, 1_000_000] as const;

export interface ScalerSpec {
  queue: string;
  targetPendingPerReplica: number;
  includeRunning: boolean;
}

/**
 * The scaler's settings from `scalerMetadata`; `path` is the map's field
 * path in the request (`scalerMetadata`, or `scaledObjectRef.scalerMetadata`
 * in GetMetrics), so an error names `scalerMetadata.queue`.
 *
 * KEDA sends every key of the trigger's `metadata` (its own `scalerAddress`
 * among them), so keys this scaler does not know are ignored.
 */
export function scalerSpec(metadata: Readonly<Record<string, string>>, path: string): ScalerSpec {
  return {
    queue: v.queueName(`${path}.queue`, metadata.queue ?? ""),
    targetPendingPerReplica: targetPendingPerReplica(`${path}.targetPendingPerReplica`, metadata.targetPendingPerReplica),
    includeRunning: flag(`${path}.includeRunning`, metadata.includeRunning),
  };
}

function targetPendingPerReplica(field: string, value: string | undefined): number {
  if (value === undefined) return DEFAULT_TARGET_PENDING_PER_REPLICA;
  const [min, max] = TARGET_PENDING_PER_REPLICA_BOUNDS;
  const n = /^[0-9]{1,7}$/.test(value.trim()) ? Number(value.trim()) : NaN;
  if (!(n >= min && n <= max)) throw invalidArgument(field, `must be a whole number from ${min} to ${max}`);
  return n;
}

function flag(field: string, value: string | undefined): boolean {
  if (value === undefined) return false;
  const text = value.trim().toLowerCase();
  if (text === "true") return true;
  if (text === "false") return false;
  throw invalidArgument(field, 'must be "true" or "false"');
}

/**
 * The name of the metric the scaler reports for a queue: KEDA makes it the
 * name of an external metric of the HorizontalPodAutoscaler (prefixed with
 * the trigger's index), so the characters of a queue name that KEDA's own
 * scalers replace in metric names (`.` and `:`) become `-`.
 */
export function metricNameOf(queue: string): string {
  return `leasequeue-pending-${queue.replace(/[.:]/g, "-")}`;
}

/**
 * Set by the edge on a scaler call that came without an Authorization
 * header while authentication is on: checks the token KEDA put under
 * SCALER_TOKEN_KEY (undefined when there is none) for this call's method,
 * answering the caller or throwing `unauthenticated` or
 * `permission_denied`. `field` names the key in the errors.
 */
export type MetadataTokenCheck = (token: string | undefined, field: string) => Caller;

export const metadataTokenCheckKey = createContextKey<MetadataTokenCheck | undefined>(undefined, {
  description: "leasequeue scaler token check",
});
