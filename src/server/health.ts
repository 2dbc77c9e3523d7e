import { once, setMaxListeners } from "node:events";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/ts/grpc/health/v1/health_pb.js";

export { ServingStatus };

export interface HealthStatusOptions {
  /**
   * Brings the statuses up to date before Check and List answer (for the
   * server: find out whether the database takes writes). Its failure is not
   * the caller's: it is expected to set the statuses, not to throw.
   */
  refresh?: () => Promise<void>;
}

/**
 * The serving status of each named service, for `grpc.health.v1.Health`.
 *
 * The key "" is the server as a whole; it is what Kubernetes gRPC probes and
 * most load balancers ask. Like grpc-go's health server, a new HealthStatus
 * reports "" as SERVING; set it to NOT_SERVING while starting or draining.
 * Changes are announced through an EventTarget (one event type per service),
 * so watchers wake on change instead of polling.
 */
export class HealthStatus {
  readonly #statuses = new Map<string, ServingStatus>();
  readonly #changes = new EventTarget();
  readonly #refresh: (() => Promise<void>) | undefined;

  constructor(initial: Record<string, ServingStatus> = { "": ServingStatus.SERVING }, options: HealthStatusOptions = {}) {
    this.#refresh = options.refresh;
    setMaxListeners(0, this.#changes); // one listener per open Watch stream; no leak warning
    for (const [service, status] of Object.entries(initial)) this.#statuses.set(service, status);
  }

  /** Sets the status of `service` and wakes its watchers if it changed. */
  set(service: string, status: ServingStatus): void {
    if (this.#statuses.get(service) === status) return;
    this.#statuses.set(service, status);
    this.#changes.dispatchEvent(new Event(service));
  }

  /** Runs the `refresh` option, if any, so that get() and list() answer with what is true now. */
  async refresh(): Promise<void> {
    try {
      await this.#refresh?.();
    } catch {
      // refresh() reports through set(); a failure to find out leaves the statuses as they are.
    }
  }

  /** The status of `service`, or undefined if it was never set. */
  get(service: string): ServingStatus | undefined {
    return this.#statuses.get(service);
  }

  /** A snapshot of every known service and its status. */
  list(): Map<string, ServingStatus> {
    return new Map(this.#statuses);
  }

  /**
   * Resolves at the next change of `service`; rejects (AbortError) when
   * `signal` aborts. Check `get()` after it resolves: changes that happen
   * while nobody waits are not queued, only the latest status counts.
   */
  async changed(service: string, signal?: AbortSignal): Promise<void> {
    await once(this.#changes, service, { signal });
  }
}

/**
 * Registers `grpc.health.v1.Health` (Check, Watch, List) backed by `health`,
 * following https://github.com/grpc/grpc/blob/master/doc/health-checking.md:
 * Check of an unknown service fails with NOT_FOUND; Watch of an unknown
 * service reports SERVICE_UNKNOWN and stays open until the service appears.
 */
export function registerHealth(router: ConnectRouter, health: HealthStatus): void {
  router.service(Health, {
    async check(request) {
      await health.refresh();
      const status = health.get(request.service);
      if (status === undefined) throw new ConnectError(`unknown service "${request.service}"`, Code.NotFound);
      return { status };
    },

    // Sends the current status at once, then each change. Changes that come
    // faster than the client reads are coalesced to the latest, as the gRPC
    // health checking protocol allows. Ends when ctx.signal aborts (client
    // gone, deadline, or server shutdown); throwing its reason tells a
    // still-connected client why (e.g. unavailable on shutdown) instead of a
    // misleading OK.
    async *watch(request, ctx) {
      let sent: ServingStatus | undefined;
      for (;;) {
        const status = health.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
        if (status !== sent) {
          sent = status;
          yield { status };
          continue;
        }
        try {
          await health.changed(request.service, ctx.signal);
        } catch (e) {
          throw ConnectError.from(ctx.signal.aborted ? ctx.signal.reason : e);
        }
      }
    },

    async list() {
      await health.refresh();
      const statuses: Record<string, { status: ServingStatus }> = {};
      for (const [service, status] of health.list()) statuses[service] = { status };
      return { statuses };
    },
  });
}
