/**
 * The SQLite store's thread (docs/performance.md "The store thread"): the
 * one place a server runs SQL on its database file. It opens the store
 * (sqlite-store.ts: the connection, group commit, the WAL's fsync, the
 * look for other writers), answers the calls the main thread sends
 * (threaded-store.ts) and reports answers, commits and write outcomes
 * back, in the order they happened, one message per turn.
 *
 * Time: the store's clock is the main thread's (it may be injected, as
 * tests do). Each message carries the main thread's time of its turn;
 * each write operation runs at the time of the turn that sent it, and
 * reads at the latest time received.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { Clock } from "../../domain/clock.js";
import type { OperationScope, WriteOperation } from "../operations/scope.js";
import { operationOf, type WriteName } from "../write-calls.js";
import { SqliteStore } from "./sqlite-store.js";
import {
  encodeError,
  packAnswer,
  packChange,
  unpackArgs,
  READ_NAMES,
  type Call,
  type FromThread,
  type Out,
  type ReadName,
  type StoreThreadOptions,
  type ToThread,
} from "./thread-messages.js";

if (parentPort === null) throw new Error("store-thread.ts runs as a worker thread of threaded-store.ts");
const port = parentPort;

/** The latest time the main thread sent. */
const clock: Clock & { latest: number } = {
  latest: Date.now(),
  now() {
    return this.latest;
  },
};

let out: Out[] = [];
let flushing = false;
function report(item: Out): void {
  out.push(item);
  if (flushing) return;
  flushing = true;
  setImmediate(flush);
}
function flush(): void {
  flushing = false;
  if (out.length === 0) return;
  const items = out;
  out = [];
  send({ kind: "out", items });
}
function send(message: FromThread): void {
  port.postMessage(message);
}

/** The operation, run at `now` (the main thread's time when it was called) instead of the transaction's. */
function at<T>(op: WriteOperation<T>, now: number): WriteOperation<T> {
  const run = (scope: OperationScope) => op({ now, port: scope.port, changes: scope.changes, earlier: scope.earlier });
  if (op.jobIds !== undefined) (run as { jobIds?: readonly string[] }).jobIds = op.jobIds;
  return run;
}

let store: SqliteStore;
try {
  store = new SqliteStore({ ...(workerData as StoreThreadOptions), clock, onDatabaseFile: (file) => report({ file }) });
  store.onCommitted((change) => report({ change: packChange(change) }));
  store.onWriteOutcome((outcome) => report({ outcome }));
  send({ kind: "open", durability: store.durability });
  port.on("message", receive);
} catch (err) {
  // Nothing else runs: the thread ends once the message is sent.
  send({ kind: "openFailed", error: encodeError(err) });
  port.close();
}

function answer(id: number, name: WriteName | ReadName, result: Promise<unknown>): void {
  result.then(
    (v) => report({ a: id, v: packAnswer(name, v) }),
    (err: unknown) => report({ a: id, e: encodeError(err) }),
  );
}

function run(call: Call, now: number): void {
  const [id, type, name, packed] = call;
  try {
    const args = unpackArgs(name, packed);
    if (type === "w") answer(id, name, store.write(at(operationOf(name, args as never), now)));
    else answer(id, name, read(name, args));
  } catch (err) {
    report({ a: id, e: encodeError(err) });
  }
}

function read(name: ReadName, args: unknown[]): Promise<unknown> {
  if (!READ_NAMES.includes(name)) return Promise.reject(new TypeError(`no read named ${String(name)}`));
  return (store[name] as (...a: unknown[]) => Promise<unknown>).apply(store, args);
}

function receive(message: ToThread): void {
  if (message.kind === "calls") {
    clock.latest = message.now;
    for (const call of message.calls) run(call, message.now);
    return;
  }
  // Close: what is queued commits, every commit is answered once durable, then the thread ends.
  store.close().then(
    () => {
      flush();
      send({ kind: "closed" });
      port.close();
    },
    (err: unknown) => {
      // A close that fails leaves nothing to answer with: the thread's error is the server's (threaded-store.ts).
      throw err;
    },
  );
}
