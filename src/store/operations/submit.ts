/**
 * Submit (docs/api.md "Idempotency keys", "Workflows"): every submission of
 * a batch is resolved before the first row is written, so a refused one
 * leaves nothing behind; repeats of a key inside the batch name the job
 * created earlier in it. A job with dependencies is counted from their
 * states (read, and on PostgreSQL locked, here), WAITING unless they are
 * met; one that a dependency's failure already cancels is cancelled in the
 * same transaction, with its dependents.
 */
import { cancelsDependent, dependencyCancelReason, withDependencies } from "../../domain/dependencies.js";
import { dependencyNotFound, QueueError } from "../../domain/errors.js";
import { publicJob, type StoredJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import { resolveSubmission, type NewJob } from "../../domain/submission.js";
import { andThen } from "./steps.js";
import type { SubmitOutcome } from "../store.js";
import type { Awaitable, DependencyEdge, TransactionPort } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";
import { applyTransitions, type DecidedTransition } from "./transitions.js";

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
  return (scope) => {
    const { now, port, changes } = scope;
    return andThen(storedJobsByKey(port, specs), (known) =>
      andThen(storedDependencies(port, specs), (dependencies) => {
        // The job each submission names (created, or the one its key names), before dependencies are counted.
        const named: StoredJob[] = [];
        const created = new Set<number>();
        specs.forEach((spec, index) => {
          const key = spec.idempotencyKey === null ? undefined : scopedKey(spec.queue, spec.idempotencyKey);
          const decision = resolveSubmission(spec, key === undefined ? undefined : known.get(key), now);
          if (decision.created) {
            created.add(index);
            if (key !== undefined) known.set(key, decision.job);
          }
          named.push(decision.job);
        });
        const edges: DependencyEdge[] = [];
        const cancels: Array<{ index: number; reason: string }> = [];
        const jobs = named.map((job, index) => {
          const deps = specs[index].dependencies;
          if (!created.has(index) || deps === undefined) return job;
          const found = deps.ids.map((id, i) => dependencies.get(id) ?? throwNotFound(`${deps.path}depends_on[${i}]`, id));
          const all = [...found, ...deps.refIndexes.map((k) => named[k])];
          const ids = all.map((d) => d.id);
          const seen = new Set<string>();
          const repeated = ids.findIndex((id) => seen.size === seen.add(id).size);
          if (repeated >= 0) {
            throw new QueueError(
              "DEPENDENCY_REPEATED",
              `${deps.path}depends_on_refs: names job ${ids[repeated]} twice among the job's dependencies`,
              { jobId: ids[repeated] },
            );
          }
          ids.forEach((dependsOnId, position) => edges.push({ jobId: job.id, dependsOnId, position }));
          const states = all.map((d, i) => (i >= found.length && created.has(deps.refIndexes[i - found.length]) ? "queued" : d.state));
          const cancelling = all.findIndex((d, i) => cancelsDependent(deps.policy, states[i]));
          if (cancelling >= 0) cancels.push({ index, reason: dependencyCancelReason(ids[cancelling], states[cancelling]) });
          return withDependencies(job, ids, states, deps.policy);
        });
        // A job of this batch that others depend on is created marked, as insertDependencies marks stored ones.
        const dependedOn = new Set(edges.map((e) => e.dependsOnId));
        const inserted: StoredJob[] = [];
        jobs.forEach((job, index) => {
          if (!created.has(index)) return;
          const stored = dependedOn.has(job.id) ? { ...job, hasDependents: true } : job;
          jobs[index] = stored;
          inserted.push(stored);
          hooks.beforeCreated?.(stored, index);
          changes.created(stored);
        });
        // A repeat of a key created earlier in the batch names that job as created.
        const createdById = new Map(inserted.map((job) => [job.id, job]));
        jobs.forEach((job, index) => {
          if (!created.has(index)) jobs[index] = createdById.get(job.id) ?? job;
        });
        const outcomes = (final: readonly StoredJob[]): SubmitOutcome[] =>
          final.map((job, index) => ({ job: publicJob(job), deduplicated: !created.has(index) }));
        if (inserted.length === 0) return outcomes(jobs);
        return andThen(port.insertJobs(inserted), () =>
          andThen(edges.length === 0 ? undefined : port.insertDependencies(edges), () => {
            if (cancels.length === 0) return outcomes(jobs);
            // Cancelled at once by a dependency that already failed; the batch's jobs read back, as the cancellations left them.
            const decided: DecidedTransition[] = cancels.map(({ index, reason }) => ({
              fromState: jobs[index].state,
              transition: machine.cancel(jobs[index], now, reason),
            }));
            return andThen(applyTransitions(scope, decided), () =>
              andThen(port.findJobs(jobs.map((j) => j.id)), (read) => outcomes(read.map((job, i) => job ?? jobs[i]))),
            );
          }),
        );
      }),
    );
  };
}

function throwNotFound(field: string, id: string): never {
  throw dependencyNotFound(field, id);
}

/** The stored jobs the batch's `depends_on` ids name, by id (read in id order; PostgreSQL locks them). */
function storedDependencies(port: TransactionPort, specs: readonly NewJob[]): Awaitable<Map<string, StoredJob>> {
  const ids = new Set<string>();
  for (const spec of specs) for (const id of spec.dependencies?.ids ?? []) ids.add(id);
  if (ids.size === 0) return new Map();
  const sorted = [...ids].sort();
  return andThen(port.findJobs(sorted), (found) => {
    const byId = new Map<string, StoredJob>();
    found.forEach((job) => {
      if (job !== undefined) byId.set(job.id, job);
    });
    return byId;
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
