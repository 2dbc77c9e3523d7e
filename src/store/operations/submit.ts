/**
 * Submit (api.md "Semantics", idempotency keys): every submission of a
 * batch is resolved before the first row is written, so a refused one
 * leaves nothing behind; repeats of a key inside the batch name the job
 * created earlier in it.
 */
import { publicJob, type StoredJob } from "../../domain/job.js";
import { resolveSubmission, type NewJob } from "../../domain/submission.js";
import type { SubmitOutcome } from "../store.js";
import type { TransactionPort } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";

const scopedKey = (queue: string, key: string) => `${queue}\0${key}`;

export function submitJobs(specs: readonly NewJob[]): WriteOperation<SubmitOutcome[]> {
  return async ({ now, port, changes }) => {
    const known = await storedJobsByKey(port, specs);
    const decided = specs.map((spec) => {
      const key = spec.idempotencyKey === null ? undefined : scopedKey(spec.queue, spec.idempotencyKey);
      const decision = resolveSubmission(spec, key === undefined ? undefined : known.get(key), now);
      if (decision.created && key !== undefined) known.set(key, decision.job);
      return decision;
    });
    const created = decided.filter((d) => d.created).map((d) => d.job);
    if (created.length > 0) {
      await port.insertJobs(created);
      for (const job of created) changes.created(job);
    }
    return decided.map((d) => ({ job: publicJob(d.job), deduplicated: !d.created }));
  };
}

/** The stored jobs that the batch's idempotency keys name, by scoped key (one lookup per distinct key). */
async function storedJobsByKey(port: TransactionPort, specs: readonly NewJob[]): Promise<Map<string, StoredJob>> {
  const keys = new Map<string, { queue: string; key: string }>();
  for (const spec of specs) {
    if (spec.idempotencyKey !== null) keys.set(scopedKey(spec.queue, spec.idempotencyKey), { queue: spec.queue, key: spec.idempotencyKey });
  }
  const known = new Map<string, StoredJob>();
  if (keys.size === 0) return known;
  const lookups = [...keys];
  const found = await port.findByIdempotencyKeys(lookups.map(([, k]) => k));
  lookups.forEach(([scoped], i) => {
    const job = found[i];
    if (job !== undefined) known.set(scoped, job);
  });
  return known;
}
