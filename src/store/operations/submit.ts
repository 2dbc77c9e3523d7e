/**
 * Submit (docs/api.md "Idempotency keys"): every submission of a
 * batch is resolved before the first row is written, so a refused one
 * leaves nothing behind; repeats of a key inside the batch name the job
 * created earlier in it.
 */
import { publicJob, type StoredJob } from "../../domain/job.js";
import { resolveSubmission, type NewJob } from "../../domain/submission.js";
import { andThen } from "../steps.js";
import type { SubmitOutcome } from "../store.js";
import type { Awaitable, TransactionPort } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";

const scopedKey = (queue: string, key: string) => `${queue}\0${key}`;

/** What a caller of submitJobs may add to the submissions. */
export interface SubmitHooks {
  /**
   * Called for each job the submission creates, before its SUBMITTED event
   * is recorded, with its index in `specs`: a schedule's run records its
   * SCHEDULED event here, so that it comes first.
   */
  beforeCreated?(job: StoredJob, index: number): void;
}

export function submitJobs(specs: readonly NewJob[], hooks: SubmitHooks = {}): WriteOperation<SubmitOutcome[]> {
  return ({ now, port, changes }) =>
    andThen(storedJobsByKey(port, specs), (known) => {
      const outcomes: SubmitOutcome[] = [];
      const created: StoredJob[] = [];
      specs.forEach((spec, index) => {
        const key = spec.idempotencyKey === null ? undefined : scopedKey(spec.queue, spec.idempotencyKey);
        const decision = resolveSubmission(spec, key === undefined ? undefined : known.get(key), now);
        if (decision.created) {
          created.push(decision.job);
          hooks.beforeCreated?.(decision.job, index);
          changes.created(decision.job);
          if (key !== undefined) known.set(key, decision.job);
        }
        outcomes.push({ job: publicJob(decision.job), deduplicated: !decision.created });
      });
      return created.length === 0 ? outcomes : andThen(port.insertJobs(created), () => outcomes);
    });
}

/** The stored jobs that the batch's idempotency keys name, by scoped key (one lookup per distinct key). */
function storedJobsByKey(port: TransactionPort, specs: readonly NewJob[]): Awaitable<Map<string, StoredJob>> {
  if (specs.every((spec) => spec.idempotencyKey === null)) return new Map();
  const keys = new Map<string, { queue: string; key: string }>();
  for (const spec of specs) {
    if (spec.idempotencyKey !== null) keys.set(scopedKey(spec.queue, spec.idempotencyKey), { queue: spec.queue, key: spec.idempotencyKey });
  }
  const lookups = [...keys];
  return andThen(port.findByIdempotencyKeys(lookups.map(([, k]) => k)), (found) => {
    const known = new Map<string, StoredJob>();
    lookups.forEach(([scoped], i) => {
      const job = found[i];
      if (job !== undefined) known.set(scoped, job);
    });
    return known;
  });
}
