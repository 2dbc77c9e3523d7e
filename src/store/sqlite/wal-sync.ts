/**
 * Durability off the event loop: the SQLite store commits with
 * synchronous=NORMAL (COMMIT does not fsync) and keeps "full" by fsyncing
 * the WAL itself, asynchronously, before it answers the commit's callers.
 * One fsync covers every batch committed before it starts, so concurrent
 * batches share it, and the server keeps serving (and committing the next
 * batch) while the disk works. Batches are settled in commit order.
 */
import { closeSync, fstatSync, fsync, fsyncSync, openSync, statSync } from "node:fs";
import { syncFailure } from "./write-failures.js";

/** Told that what was committed before it was queued is on disk, or why not. */
export type DurableSettle = (error?: unknown) => void;

export class WalSync {
  readonly #walPath: string;
  /** Open descriptor of the WAL file, for fsync; opened at the first sync. */
  #walFd: number | undefined;
  /** Settles waiting for the next fsync, in commit order. */
  #awaiting: DurableSettle[] = [];
  #syncing = false;
  #synced: Promise<void> = Promise.resolve();
  #syncs = 0;

  /** Told each time the last fsync started has returned and nothing waits for another. */
  readonly #idle: () => void;

  constructor(walPath: string, onIdle: () => void = () => {}) {
    this.#walPath = walPath;
    this.#idle = onIdle;
  }

  /** True while an fsync runs. */
  get syncing(): boolean {
    return this.#syncing;
  }

  /** fsyncs started so far: with group commit, far fewer than the writes answered. */
  get syncs(): number {
    return this.#syncs;
  }

  /** Runs `settle` once everything committed so far is on disk. */
  whenDurable(settle: DurableSettle): void {
    this.#awaiting.push(settle);
    if (!this.#syncing) this.#startSync();
  }

  /** Resolves when every settle queued so far has run. */
  async drain(): Promise<void> {
    while (this.#syncing || this.#awaiting.length > 0) {
      await this.#synced;
      if (!this.#syncing && this.#awaiting.length > 0) this.#startSync();
    }
  }

  /** A last synchronous fsync, then closes the descriptor. */
  close(): void {
    if (this.#walFd === undefined) return;
    fsyncSync(this.#walFd);
    closeSync(this.#walFd);
    this.#walFd = undefined;
  }

  /** One fsync of the WAL for every batch committed before it starts. */
  #startSync(): void {
    const settles = this.#awaiting.splice(0);
    this.#syncing = true;
    let fd: number;
    try {
      fd = this.#walDescriptor();
    } catch (err) {
      this.#finishSync(settles, err);
      return;
    }
    this.#syncs++;
    this.#synced = new Promise((resolve) => {
      fsync(fd, (err) => {
        this.#finishSync(settles, err ?? undefined);
        resolve();
      });
    });
  }

  #finishSync(settles: DurableSettle[], err: unknown): void {
    this.#syncing = false;
    const error = err === undefined || err === null ? undefined : syncFailure(err);
    for (const settle of settles) settle(error);
    if (this.#awaiting.length > 0) this.#startSync();
    else this.#idle();
  }

  /**
   * The WAL's descriptor, reopened if the file was replaced (SQLite deletes
   * the WAL when the last connection to the database closes, and a new one
   * is created by the next writer).
   */
  #walDescriptor(): number {
    if (this.#walFd !== undefined) {
      let current: number | undefined;
      try {
        current = statSync(this.#walPath).ino;
      } catch {
        current = undefined;
      }
      if (current === fstatSync(this.#walFd).ino) return this.#walFd;
      closeSync(this.#walFd);
      this.#walFd = undefined;
    }
    this.#walFd = openSync(this.#walPath, "r+");
    return this.#walFd;
  }
}
