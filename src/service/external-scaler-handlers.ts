/**
 * externalscaler.ExternalScaler, KEDA's external scaler protocol
 * (proto/externalscaler/externalscaler.proto), served on the API port so
 * that KEDA scales a queue's workers on its depth with nothing else to run
 * (docs/operations.md "Autoscaling workers").
 */
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { ExternalScaler } from "../../gen/ts/externalscaler/externalscaler_pb.js";
import type { BacklogWatches } from "../dispatch/backlog-watches.js";
import type { QueueBacklog, Store } from "../store/store.js";
import { callerKey, requireQueue } from "./queue-access.js";
import { metadataTokenCheckKey, metricNameOf, SCALER_TOKEN_KEY, scalerSpec, type ScalerSpec } from "./scaler-metadata.js";

export interface ExternalScalerDeps {
  store: Store;
  /** Wakes StreamIsActive when its queue may have changed. */
  backlogWatches: BacklogWatches;
}

/**
 * The metric of a queue's backlog: what KEDA divides by targetPendingPerReplica.
 * It is the queue's pending jobs: QUEUED and RETRY jobs whose time
 * has come (a delayed job or a retry in its backoff counts once it is due),
 * none while the queue is paused (nothing would lease them), plus its
 * RUNNING jobs with `includeRunning`. The queue is active while the metric
 * is above 0. GetMetricSpec asks KEDA for `targetPendingPerReplica` of it
 * per replica.
 */
export function pendingJobs(backlog: QueueBacklog, includeRunning: boolean): number {
  return (backlog.paused ? 0 : backlog.eligible) + (includeRunning ? backlog.running : 0);
}

/**
 * StreamIsActive sends the activity at once and then each change: it reads
 * the queue again when a commit of the queue is announced (any server's) or
 * its next waiting job comes due (dispatch/backlog-watches.ts), never on a
 * timer of its own. StreamMetricSpec is `unimplemented`: the spec follows
 * from the ScaledObject's metadata alone and never changes under a stream,
 * and KEDA falls back to GetMetricSpec (the proto's comment on it).
 *
 * Every call needs the `reader` role when authentication is on, with the
 * token in the Authorization header or in scalerMetadata (scaler-metadata.ts).
 */
export function createExternalScalerService({ store, backlogWatches }: ExternalScalerDeps): ServiceImpl<typeof ExternalScaler> {
  /** Authenticates (a metadata token), validates the metadata, and checks the caller's queues. */
  function admit(metadata: Record<string, string>, path: string, ctx: HandlerContext): ScalerSpec {
    const check = ctx.values.get(metadataTokenCheckKey);
    // Set only when authentication is on and the call had no Authorization header (the edge checked that one).
    if (check !== undefined) ctx.values.set(callerKey, check(metadata[SCALER_TOKEN_KEY], `${path}.${SCALER_TOKEN_KEY}`));
    const spec = scalerSpec(metadata, path);
    requireQueue(ctx, `${path}.queue`, spec.queue);
    return spec;
  }

  return {
    async isActive(req, ctx) {
      const spec = admit(req.scalerMetadata, "scalerMetadata", ctx);
      return { result: pendingJobs(await store.queueBacklog(spec.queue), spec.includeRunning) > 0 };
    },

    async *streamIsActive(req, ctx) {
      const spec = admit(req.scalerMetadata, "scalerMetadata", ctx);
      // Watching before the first read: a commit during it wakes the next wait.
      const watch = backlogWatches.watch(spec.queue);
      try {
        let sent: boolean | undefined;
        for (;;) {
          const backlog = await store.queueBacklog(spec.queue);
          const active = pendingJobs(backlog, spec.includeRunning) > 0;
          if (active !== sent) {
            sent = active;
            yield { result: active };
          }
          if (!(await watch.next(backlog.nextEligibleTime, ctx.signal))) break;
        }
      } finally {
        watch.close();
      }
      // Ended by the client, a deadline, or shutdown (unavailable: KEDA opens it again).
      if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason);
      throw new ConnectError("the server is shutting down", Code.Unavailable);
    },

    getMetricSpec(req, ctx) {
      const spec = admit(req.scalerMetadata, "scalerMetadata", ctx);
      const target = spec.targetPendingPerReplica;
      return { metricSpecs: [{ metricName: metricNameOf(spec.queue), targetSize: BigInt(target), targetSizeFloat: target }] };
    },

    async getMetrics(req, ctx) {
      const spec = admit(req.scaledObjectRef?.scalerMetadata ?? {}, "scaledObjectRef.scalerMetadata", ctx);
      const pending = pendingJobs(await store.queueBacklog(spec.queue), spec.includeRunning);
      // KEDA asks by the name GetMetricSpec gave (without its trigger-index prefix) and keeps its own name for the answer.
      const metricName = req.metricName === "" ? metricNameOf(spec.queue) : req.metricName;
      return { metricValues: [{ metricName, metricValue: BigInt(pending), metricValueFloat: pending }] };
    },

    streamMetricSpec() {
      throw new ConnectError(
        "StreamMetricSpec is not served: the metric spec follows from the ScaledObject's metadata and never changes; use GetMetricSpec",
        Code.Unimplemented,
      );
    },
  };
}
