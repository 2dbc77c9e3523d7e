/** The `i`-th job of an in-process store benchmark, as the store's submit takes it (a NewJob). */
export function newJob(i) {
  return {
    queue: "bench",
    task: "t",
    groupKey: "",
    payloadJson: JSON.stringify({ i }),
    priority: 0,
    maxAttempts: 3,
    retryBaseDelayMs: 1000,
    schedule: null,
    idempotencyKey: null,
    traceContext: null,
  };
}
