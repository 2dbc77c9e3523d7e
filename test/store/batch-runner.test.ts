/**
 * The batch runner every engine's group commit shares (src/store/writing/batch-runner.ts),
 * driven over a fake transaction: rows in a map, savepoints as copies of it,
 * so what a rollback keeps and drops is visible. The engines' own tests
 * (test/store/sqlite/sqlite-store.test.ts, the contract on both engines) cover it
 * over real databases.
 */
import { describe, expect, it } from "vitest";
import {
  answerBatch,
  runOperations,
  WriteQueue,
  type BatchPort,
  type BatchRun,
  type BatchTransaction,
  type OperationFailure,
  type PendingWrite,
} from "../../src/store/writing/batch-runner.js";
import type { OperationScope, WriteOperation } from "../../src/store/operations/scope.js";
import { settledNow } from "../../src/store/operations/steps.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A transaction over a map of rows; `steps` records what the runner asked of it. */
class FakeTransaction implements BatchTransaction<string> {
  readonly port = { wrote: false } as BatchPort;
  rows = new Map<string, string>();
  readonly steps: string[] = [];
  #savepoints: Array<Map<string, string>> = [];
  /** Whether the engine's steps answer with promises (as PostgreSQL's do). */
  constructor(readonly waits = false) {}

  now(): number {
    return 1_000;
  }

  write(key: string, value: string): void {
    this.rows.set(key, value);
    this.port.wrote = true;
  }

  #step(name: string): void | Promise<void> {
    this.steps.push(name);
    return this.waits ? Promise.resolve() : undefined;
  }

  savepoint(): void | Promise<void> {
    this.#savepoints.push(new Map(this.rows));
    return this.#step("savepoint");
  }

  release(): void | Promise<void> {
    this.#savepoints.pop();
    return this.#step("release");
  }

  rollbackToSavepoint(): void | Promise<void> {
    this.rows = this.#savepoints.pop()!;
    return this.#step("rollback to savepoint");
  }

  savepointFailed(error: unknown): string {
    return `savepoint failed: ${(error as Error).message}`;
  }

  /** As both engines judge: a failure after a write needs the replay; a fatal one stops the batch. */
  failed(error: unknown, guarded: boolean): OperationFailure<string> {
    if ((error as Error).message === "fatal") return { stopped: "the transaction is gone" };
    if (!guarded && this.port.wrote) return "replay";
    return { refused: error };
  }
}

/** An operation that writes `key`, counts one job in `queue`, and may fail before or after writing. */
function op(tx: FakeTransaction, key: string, fails?: "before writing" | "after writing" | "fatal"): WriteOperation<string> {
  const body = (scope: OperationScope) => {
    if (fails === "before writing") throw new Error(`${key} refused`);
    if (fails === "fatal") throw new Error("fatal");
    tx.write(key, `written at ${scope.now}`);
    scope.changes.count("q", "queued", 1);
    if (fails === "after writing") throw new Error(`${key} failed after writing`);
    return key;
  };
  return (scope) => (tx.waits ? Promise.resolve().then(() => body(scope)) : body(scope));
}

function pending(ops: WriteOperation<unknown>[]): PendingWrite[] {
  return ops.map((o) => ({ op: o, resolve: () => {}, reject: () => {} }));
}

function outcomes(end: unknown): unknown[] {
  return (end as BatchRun).outcomes.map((o) => (o.ok ? o.value : (o.error as Error).message));
}

describe.each([
  { engine: "a port that answers at once", waits: false },
  { engine: "a port that answers with promises", waits: true },
])("runOperations over $engine", ({ waits }) => {
  it("runs the operations in issue order without savepoints, a refusal before writing rolling nothing back", async () => {
    const tx = new FakeTransaction(waits);
    const end = await runOperations(pending([op(tx, "a"), op(tx, "b", "before writing"), op(tx, "c")]), false, tx);
    expect(outcomes(end)).toEqual(["a", "b refused", "c"]);
    expect([...tx.rows.keys()]).toEqual(["a", "c"]);
    expect(tx.steps).toEqual([]);
    expect((end as BatchRun).wrote).toBe(true);
    expect((end as BatchRun).changes.toWrite().deltas).toEqual([{ queue: "q", state: "queued", delta: 2 }]);
  });

  it("asks for a replay when an operation fails after writing, and in the replay rolls back that operation alone", async () => {
    const batch = (tx: FakeTransaction) => pending([op(tx, "a"), op(tx, "b", "after writing"), op(tx, "c")]);
    const first = new FakeTransaction(waits);
    expect(await runOperations(batch(first), false, first)).toBe("replay");

    const replay = new FakeTransaction(waits);
    const end = await runOperations(batch(replay), true, replay);
    expect(outcomes(end)).toEqual(["a", "b failed after writing", "c"]);
    // b's write went with its savepoint; its neighbours' stayed.
    expect([...replay.rows.keys()]).toEqual(["a", "c"]);
    expect(replay.steps).toEqual(["savepoint", "release", "savepoint", "rollback to savepoint", "savepoint", "release"]);
    // Only the operations that stand count.
    expect((end as BatchRun).changes.toWrite().deltas).toEqual([{ queue: "q", state: "queued", delta: 2 }]);
  });

  it("stops at a failure the engine cannot keep, running nothing after it", async () => {
    const tx = new FakeTransaction(waits);
    const end = await runOperations(pending([op(tx, "a"), op(tx, "b", "fatal"), op(tx, "c")]), false, tx);
    expect(end).toEqual({ stopped: "the transaction is gone" });
    expect(tx.rows.has("c")).toBe(false);
  });

  it("stops when a savepoint cannot be opened", async () => {
    const tx = new FakeTransaction(waits);
    tx.savepoint = () => {
      throw new Error("no savepoint");
    };
    const end = await runOperations(pending([op(tx, "a")]), true, tx);
    expect(end).toEqual({ stopped: "savepoint failed: no savepoint" });
    expect(tx.rows.size).toBe(0);
  });
});

describe("runOperations", () => {
  it("runs a batch over a port that answers at once to its end synchronously", () => {
    const tx = new FakeTransaction(false);
    const end = runOperations(pending([op(tx, "a"), op(tx, "b", "after writing")]), true, tx);
    expect(end).not.toBeInstanceOf(Promise);
    expect(outcomes(end)).toEqual(["a", "b failed after writing"]);
  });

  it("tells an operation the changes of those before it in the transaction", () => {
    const tx = new FakeTransaction(false);
    const seen: string[][] = [];
    const recording: WriteOperation<null> = (scope) => {
      seen.push([...scope.earlier.changedJobs()]);
      scope.changes.events.push({ jobId: `job-${seen.length}` } as never);
      return null;
    };
    settledNow(runOperations(pending([recording, recording, recording]), false, tx));
    expect(seen).toEqual([[], ["job-1"], ["job-1", "job-2"]]);
  });
});

describe("answerBatch", () => {
  it("answers each caller with its own operation's outcome, or every caller with the commit's error", async () => {
    const settle = () => {
      const answers: Array<Promise<unknown>> = [];
      const batch = [0, 1].map(() => {
        let resolve!: (v: unknown) => void;
        let reject!: (e: unknown) => void;
        answers.push(new Promise((res, rej) => ((resolve = res), (reject = rej))));
        const write: PendingWrite = { op: () => null, resolve, reject };
        return write;
      });
      return { batch, answers: () => Promise.allSettled(answers) };
    };
    const ok = settle();
    answerBatch(ok.batch, [
      { ok: true, value: "first" },
      { ok: false, error: "second refused" },
    ]);
    expect(await ok.answers()).toEqual([
      { status: "fulfilled", value: "first" },
      { status: "rejected", reason: "second refused" },
    ]);
    const lost = settle();
    answerBatch(
      lost.batch,
      [
        { ok: true, value: "first" },
        { ok: true, value: "second" },
      ],
      "not durable",
    );
    expect(await lost.answers()).toEqual([
      { status: "rejected", reason: "not durable" },
      { status: "rejected", reason: "not durable" },
    ]);
  });
});

describe("WriteQueue", () => {
  /** A queue whose runs take everything queued, recording each batch's names. */
  function queue(held = () => false) {
    const batches: string[][] = [];
    const q: WriteQueue = new WriteQueue(() => {
      const batch = q.take(Infinity);
      batches.push(batch.map((p) => (p.op as unknown as { label: string }).label));
      for (const p of batch) p.resolve(undefined);
    }, held);
    const write = (label: string) => q.write(Object.assign(() => null, { label }));
    return { q, batches, write };
  }

  it("runs the writes of one turn of the event loop together, in issue order", async () => {
    const { batches, write } = queue();
    await Promise.all([write("a"), write("b"), write("c")]);
    await write("d");
    expect(batches).toEqual([["a", "b", "c"], ["d"]]);
  });

  it("keeps writes while held, over many turns, until schedule()", async () => {
    let holding = true;
    const { q, batches, write } = queue(() => holding);
    const written = [write("a"), write("b")];
    await turn();
    written.push(write("c"));
    await turn();
    expect(batches).toEqual([]);
    expect(q.length).toBe(3);
    holding = false;
    q.schedule();
    await Promise.all(written);
    expect(batches).toEqual([["a", "b", "c"]]);
  });

  it("takes the writes a choice picks, leaving the others queued in their order", () => {
    const q = new WriteQueue(() => {});
    const labels = ["a", "b", "c", "d", "e"];
    for (const label of labels) void q.write(Object.assign(() => null, { label }));
    const name = (p: PendingWrite) => (p.op as unknown as { label: string }).label;
    const taken = q.takeWhere((p, n) => n < 2 && name(p) !== "a");
    expect(taken.map(name)).toEqual(["b", "c"]);
    expect(q.take(10).map(name)).toEqual(["a", "d", "e"]);
  });
});
