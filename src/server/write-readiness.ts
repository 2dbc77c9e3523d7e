/**
 * Readiness that follows the database's ability to take writes (docs/api.md
 * "Side port": /health/ready is 200 only while the database is writable).
 *
 * The store reports the outcome of every write transaction; this turns it
 * into the side port's readiness and the grpc.health.v1 statuses of the
 * server, so a load balancer stops sending traffic while writes fail (disk
 * full, immutable files, a lock held elsewhere) and sends it again by itself
 * once a write succeeds. While writes fail it asks the store once per
 * `retryIntervalMs`, so recovery shows even when no client writes and
 * nobody scrapes.
 */
import type { Logger } from "../logger.js";
import type { Store, WriteOutcome } from "../store/store.js";
import { ServingStatus, type HealthStatus } from "./health.js";

export interface WriteReadinessOptions {
  store: Pick<Store, "onWriteOutcome" | "checkWritable">;
  health: HealthStatus;
  /** The grpc.health.v1 service names that follow write health ("" is the server as a whole). */
  services: readonly string[];
  log: Logger;
  /** While writes fail, how often to ask the store again. Default 1000 ms. */
  retryIntervalMs?: number;
}

export class WriteReadiness {
  readonly #opts: WriteReadinessOptions;
  readonly #retryIntervalMs: number;
  readonly #unsubscribe: () => void;
  #failing: Extract<WriteOutcome, { ok: false }> | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opts: WriteReadinessOptions) {
    this.#opts = opts;
    this.#retryIntervalMs = opts.retryIntervalMs ?? 1000;
    this.#unsubscribe = opts.store.onWriteOutcome((outcome) => this.#follow(outcome));
  }

  /** True unless the latest write transaction failed. */
  get writable(): boolean {
    return this.#failing === undefined;
  }

  /**
   * Throws (with the store's reason) unless the database takes writes now.
   * Cheap to call often: the store answers from its latest write and probes
   * at most once per interval.
   */
  async check(): Promise<void> {
    await this.#opts.store.checkWritable();
  }

  /** Stops following the store (at shutdown, when the statuses say NOT_SERVING for another reason). */
  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    clearInterval(this.#retry);
    this.#retry = undefined;
  }

  #follow(outcome: WriteOutcome): void {
    if (this.#closed) return;
    if (!outcome.ok) {
      if (this.#failing === undefined) {
        this.#opts.log.warn("database writes are failing; not ready until a write succeeds", {
          cause: outcome.cause,
          error: outcome.message,
        });
        this.#setAll(ServingStatus.NOT_SERVING);
        this.#retry = setInterval(() => void this.check().catch(() => {}), this.#retryIntervalMs);
        this.#retry.unref();
      }
      this.#failing = outcome;
      return;
    }
    if (this.#failing !== undefined) {
      this.#opts.log.info("database writes succeed again; ready", { after: this.#failing.cause });
      this.#failing = undefined;
      clearInterval(this.#retry);
      this.#retry = undefined;
      this.#setAll(ServingStatus.SERVING);
    }
  }

  #setAll(status: ServingStatus): void {
    for (const service of this.#opts.services) this.#opts.health.set(service, status);
  }
}
