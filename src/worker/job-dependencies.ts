/**
 * A leased job's direct dependencies' outcomes (Lease.dependencies;
 * docs/api.md "Dependencies") as a handler reads them: plain JSON results,
 * looked up by job id.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { DependencyResult, JobState } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { valueToJson } from "./json-values.js";

/** One direct dependency's outcome when the job was leased. */
export interface Dependency {
  readonly jobId: string;
  /** Its state when the job was leased: COMPLETED (DEAD or CANCELLED too for a job submitted with DEPENDENCY_FAILURE_POLICY_IGNORE). */
  readonly state: JobState;
  /** Its result as plain JSON (`null` when it has none). */
  readonly result: JsonValue;
  /** Its last error (`""` when none). */
  readonly lastError: string;
}

/** The lease's dependencies as handlers see them, in `depends_on` order. */
export function dependenciesOf(results: readonly DependencyResult[]): readonly Dependency[] {
  return Object.freeze(
    results.map((d) => Object.freeze({ jobId: d.jobId, state: d.state, result: valueToJson(d.result), lastError: d.lastError })),
  );
}

/** The result of the dependency `jobId`, or a RangeError when the lease does not carry it. */
export function dependencyResult(dependencies: readonly Dependency[], truncated: boolean, jobId: string): JsonValue {
  const found = dependencies.find((d) => d.jobId === jobId);
  if (found !== undefined) return found.result;
  throw new RangeError(
    truncated
      ? `job ${jobId} is not among the first ${dependencies.length} dependencies the lease carries (ListJobs' dependenciesOf pages through all)`
      : `job ${jobId} is not a dependency of this job`,
  );
}
