/**
 * What the API port serves: leasequeue.v1, KEDA's externalscaler.ExternalScaler
 * (docs/operations.md "Autoscaling workers"), grpc.health.v1 and (when
 * enabled) gRPC reflection, plus the interceptor that is the single place where
 * handler failures become wire errors and RPC durations are recorded.
 */
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { ExternalScaler } from "../../gen/ts/externalscaler/externalscaler_pb.js";
import { file_google_rpc_error_details } from "../../gen/ts/google/rpc/error_details_pb.js";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { Logger } from "../logger.js";
import { codeLabel, type Metrics } from "../metrics/metrics.js";
import { toConnectError } from "../service/errors.js";
import { callRecordKey, requestParseError } from "./call-record.js";
import { registerHealth, type HealthStatus } from "./health.js";
import { registerReflection } from "./reflection.js";

export interface RoutesOptions {
  service: ServiceImpl<typeof LeaseQueueService>;
  /** KEDA's external scaler; not served when absent (a bench that mounts a do-nothing service). */
  scaler?: ServiceImpl<typeof ExternalScaler>;
  health: HealthStatus;
  reflection: boolean;
}

export function routes(opts: RoutesOptions): (router: ConnectRouter) => void {
  return (router) => {
    router.service(LeaseQueueService, opts.service);
    if (opts.scaler !== undefined) router.service(ExternalScaler, opts.scaler);
    registerHealth(router, opts.health);
    if (opts.reflection) {
      const services: DescService[] = [LeaseQueueService, ...(opts.scaler !== undefined ? [ExternalScaler] : []), Health];
      registerReflection(router, services, [file_google_rpc_error_details]);
    }
  };
}

/**
 * Translates every error leaving a handler (unary or stream) with
 * toConnectError, logs the ones that are bugs, and times each call.
 *
 * A client that reset its stream or closed its connection is `canceled`
 * (logged at debug): the body read fails under the handler, which is the
 * client's doing, not a server failure. A client-streaming message that is
 * not valid protobuf binary is `invalid_argument` (connect words it as
 * `internal`; see call-outcome.ts).
 */
export function boundaryInterceptor(log: Logger, metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const method = req.method.name;
    const record = req.contextValues.get(callRecordKey);
    const fail = (err: unknown) => {
      const cutShort = record?.cutShort();
      if (cutShort !== undefined) {
        log.debug("call cut short", { method: `${req.service.typeName}/${method}`, code: codeLabel(cutShort) });
        const why = cutShort === Code.Canceled ? "the client canceled the call" : "the request did not arrive in time";
        return new ConnectError(why, cutShort, undefined, undefined, err);
      }
      const error = toConnectError(err);
      const parseError = requestParseError(error.code, error.rawMessage, req.method.input.typeName);
      if (parseError !== undefined) return parseError;
      if (error.code === Code.Internal) {
        log.error("handler failed", { method: `${req.service.typeName}/${method}`, error: error.cause ?? err });
      }
      return error;
    };
    // The adapter records a call whose client left before this did.
    const observe = (code: Code | undefined) => {
      if (record?.observed) return;
      if (record) record.observed = true;
      metrics.observeRpc(method, code, (performance.now() - started) / 1000);
    };
    try {
      const res = await next(req);
      if (!res.stream) {
        observe(undefined);
        return res;
      }
      // A stream is recorded when it ends: a failure while it runs (a
      // request message that does not parse, a refusal) with its code. One
      // the client leaves is recorded by the adapter when it closes.
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (err) {
            const error = fail(err);
            observe(error.code);
            throw error;
          }
          observe(undefined);
        })(),
      };
    } catch (err) {
      const error = fail(err);
      observe(error.code);
      throw error;
    }
  };
}
