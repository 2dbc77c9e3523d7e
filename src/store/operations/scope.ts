/**
 * The write operations every engine shares (this folder): each is a
 * function of an OperationScope that loads through the port, lets the state
 * machine (domain/state-machine.ts) decide, persists the outcome and records
 * its events and count changes. An engine runs them inside its own
 * transactions, many per transaction when it groups commits, in the order
 * they were issued. Each step waits for the port with store/operations/steps.ts
 * andThen, so an operation answers at once when the port does (SQLite) and
 * with a promise when it does not (PostgreSQL).
 */
import type { OperationChanges, TransactionChanges } from "./operation-changes.js";
import type { Awaitable, TransactionPort } from "../transaction-port.js";

export interface OperationScope {
  /** The operation's time, read from the store's clock when it starts. */
  readonly now: number;
  readonly port: TransactionPort;
  /**
   * Where the operation records its events, count changes and queue
   * controls. An operation that fails (a refusal, or a write the database
   * refused) leaves them behind: the engine drops them with it.
   */
  readonly changes: OperationChanges;
  /** The changes of the operations before this one in the same transaction (not written yet). */
  readonly earlier: Pick<TransactionChanges, "changedJobs">;
}

/**
 * One write operation. It refuses by throwing a QueueError (or answering a
 * promise rejected with one) before it writes anything. `jobIds`, when set,
 * names the jobs it will load by id (port.findJobs): an engine that locks
 * rows may lock those of a whole batch up front, in id order (PostgreSQL:
 * one SELECT ... FOR UPDATE, and no deadlock between two transactions that
 * touch the same jobs in different orders), and answer the operations'
 * findJobs from them. `claimsQueue`, when set, names the queue the
 * operation claims from: an engine that runs several transactions at once
 * may keep claims of one queue in transactions of their own (PostgreSQL:
 * a claim of a queue with limits waits for the queue's config row, so a
 * transaction that holds other rows first must not wait for it). SQLite
 * ignores both.
 */
export interface WriteOperation<T> {
  (scope: OperationScope): Awaitable<T>;
  readonly jobIds?: readonly string[];
  readonly claimsQueue?: string;
}

/** Names the jobs an operation loads by id (see WriteOperation.jobIds). */
export function loadingJobs<T>(jobIds: readonly string[], run: (scope: OperationScope) => Awaitable<T>): WriteOperation<T> {
  (run as { jobIds?: readonly string[] }).jobIds = jobIds;
  return run;
}

/** Names the queue an operation claims from (see WriteOperation.claimsQueue). */
export function claimingFrom<T>(queue: string, run: (scope: OperationScope) => Awaitable<T>): WriteOperation<T> {
  (run as { claimsQueue?: string }).claimsQueue = queue;
  return run;
}
