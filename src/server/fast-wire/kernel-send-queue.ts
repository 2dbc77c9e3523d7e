/**
 * Bytes waiting in the kernel's send queue of TCP connections (Linux), for
 * telling a WatchEvents client that does not read from one that does.
 */
import { readFile } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { isIPv4, type Socket } from "node:net";

export interface KernelSendQueuesOptions {
  /** Least time between two samples. Default 200 ms. */
  intervalMs?: number;
  /** The files to read. Default /proc/self/net/tcp for IPv4 connections and /proc/self/net/tcp6 for IPv6 ones. */
  files?: readonly string[];
}

const IPV4_FILE = "/proc/self/net/tcp";
const IPV6_FILE = "/proc/self/net/tcp6";

/** One connection's kernel send queue, as KernelSendQueues follows it. */
export interface KernelQueueProbe {
  /** Bytes in the send queue as of the latest sample (0 when unknown). */
  queued: () => number;
  /** Bytes handed to the kernel since the peer was last seen to have taken everything before: unread at worst. */
  unconfirmed: () => number;
  /** How many bytes may go unconfirmed before a writer should wait for the next sample. */
  allowance: () => number;
  /** Resolves once a sample taken after the call has been read (at most an interval away). */
  nextSample: () => Promise<void>;
}

const UNKNOWN_QUEUE: KernelQueueProbe = {
  queued: () => 0,
  unconfirmed: () => 0,
  allowance: () => Infinity,
  nextSample: async () => {},
};

/** The most an allowance grows, as a multiple of `minBytes`. */
const MAX_ALLOWANCE_FACTOR = 8;

interface Watched {
  key: string;
  socket: Socket;
  /** Bytes the peer is known to have acknowledged, as of the latest sample. */
  acknowledged: number;
  /** Bytes the socket had handed to the kernel when the sample in flight started. */
  writtenAtSample: number;
  /** Its send queue in the latest sample. */
  queued: number;
  minBytes: number;
  /** Unconfirmed bytes allowed before a sample is needed. */
  allowance: number;
}

/**
 * On HTTP/1.1 every write lands in the socket's kernel buffer, which grows
 * to megabytes when the peer does not read: Node's own buffers stay empty,
 * so the process alone would see such a client as keeping up while it
 * copies event after event into the kernel. Linux reports each TCP socket's
 * send queue (bytes not yet acknowledged by the peer) in /proc/self/net/tcp
 * and tcp6; this samples those files in the background and answers from
 * the latest sample.
 *
 * Sampling costs the kernel time in proportion to every socket of the network
 * namespace, so it happens only when a watched connection could hold more
 * than `minBytes` unread (more than that was written since the last sample
 * showed what the peer had taken), at most once per `intervalMs`, and on a
 * busy machine less often (the interval grows to 10 times what the latest
 * sample took, up to 1 s), reading only the files of the address families
 * watched. Where the files cannot be read (not Linux), every answer is 0 and
 * only Node's buffers count.
 *
 * Between samples nobody knows whether the peer reads, so a writer may also
 * hold back once more than its allowance is unconfirmed and wait for the
 * next sample: then a peer that never reads gets at most about `minBytes`
 * into the kernel before the server sees it, and one that reads waits at
 * most an interval per allowance written. The allowance starts at
 * `minBytes` and doubles (up to 8 times) with every sample that finds the
 * peer keeping up, so steady readers cost few samples; the kernel itself
 * holds at most a few MiB per connection, past which Node's own buffer shows
 * a reader that stopped.
 */
export class KernelSendQueues {
  readonly #intervalMs: number;
  readonly #files: readonly string[] | undefined;
  readonly #watched = new Set<Watched>();
  /** How long the latest sample took to read: the interval is at least 10 times that (at most 1 s). */
  #sampleCostMs = 0;
  #sampledAt = -Infinity;
  #sampling: Promise<void> | undefined;
  #available = true;

  constructor(options: KernelSendQueuesOptions = {}) {
    this.#intervalMs = options.intervalMs ?? 200;
    this.#files = options.files;
  }

  /**
   * Follows `socket`'s kernel send queue. Asking `queued()` starts a new
   * sample when more than `minBytes` may be unread and the latest sample is
   * older than the interval.
   */
  probe(socket: Socket, minBytes: number): KernelQueueProbe {
    const key = procKey(socket);
    if (key === undefined || !this.#available) return UNKNOWN_QUEUE;
    const watched: Watched = { key, socket, acknowledged: 0, writtenAtSample: 0, queued: 0, minBytes, allowance: minBytes };
    this.#watched.add(watched);
    socket.once("close", () => this.#watched.delete(watched));
    const unconfirmed = () => (this.#available ? handedToKernel(socket) - watched.acknowledged : 0);
    return {
      queued: () => {
        if (unconfirmed() > watched.allowance) this.#sampleIfStale();
        return watched.queued;
      },
      unconfirmed,
      allowance: () => (this.#available ? watched.allowance : Infinity),
      nextSample: () => this.#nextSample(),
    };
  }

  /** Resolves once the sample in flight (if any) has been read. */
  async sampled(): Promise<void> {
    await this.#sampling;
  }

  /** Resolves once a sample that started after this call has been read (at most an interval away). */
  async #nextSample(): Promise<void> {
    await this.#sampling;
    const wait = this.#interval() - (performance.now() - this.#sampledAt);
    if (wait > 0) await delay(wait);
    if (!this.#available) return;
    this.#sampleIfStale();
    await this.#sampling;
  }

  #interval(): number {
    return Math.max(this.#intervalMs, Math.min(1000, 10 * this.#sampleCostMs));
  }

  /** The files to read for what is watched now. */
  #filesToRead(): string[] {
    if (this.#files !== undefined) return [...this.#files];
    let v4 = false;
    let v6 = false;
    for (const w of this.#watched) {
      if (w.key.indexOf(":") === 8) v4 = true;
      else v6 = true;
    }
    return [...(v4 ? [IPV4_FILE] : []), ...(v6 ? [IPV6_FILE] : [])];
  }

  #sampleIfStale(): void {
    const started = performance.now();
    if (this.#sampling !== undefined || started - this.#sampledAt < this.#interval()) return;
    for (const w of this.#watched) w.writtenAtSample = handedToKernel(w.socket);
    const files = this.#filesToRead();
    this.#sampling = Promise.all(files.map((f) => readFile(f, "latin1").catch(() => undefined)))
      .then((texts) => {
        if (texts.length > 0 && texts.every((t) => t === undefined)) {
          this.#available = false;
          return;
        }
        const queues = new Map<string, number>();
        for (const text of texts) if (text !== undefined) parseInto(text, queues);
        for (const w of this.#watched) {
          w.queued = queues.get(w.key) ?? 0;
          // Everything written before the sample started and not queued was taken.
          w.acknowledged = Math.max(w.acknowledged, w.writtenAtSample - w.queued);
          // A peer that keeps up earns room; one that falls behind loses it.
          w.allowance = w.queued <= w.minBytes / 4 ? Math.min(2 * w.allowance, MAX_ALLOWANCE_FACTOR * w.minBytes) : w.minBytes;
        }
      })
      .finally(() => {
        this.#sampling = undefined;
        this.#sampledAt = performance.now();
        this.#sampleCostMs = this.#sampledAt - started;
      });
  }
}

/** Node counts what it still buffers in bytesWritten; the kernel has the rest. */
function handedToKernel(socket: Socket): number {
  return socket.bytesWritten - socket.writableLength;
}

/** Adds every established socket's tx_queue of one /proc/net/tcp* text to `into`. */
function parseInto(text: string, into: Map<string, number>): void {
  let start = text.indexOf("\n") + 1; // skip the header
  while (start > 0 && start < text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    // "  12: LOCAL:PORT REMOTE:PORT ST TX:RX ..."
    const fields = text.slice(start, end).trim().split(/\s+/, 5);
    start = end + 1;
    if (fields.length < 5 || fields[3] !== "01") continue; // 01: ESTABLISHED
    const tx = parseInt(fields[4].slice(0, fields[4].indexOf(":")), 16);
    if (tx > 0) into.set(`${fields[1]} ${fields[2]}`, tx);
  }
}

/** The socket's "<local>:<port> <remote>:<port>" in /proc's hex notation. */
function procKey(socket: Socket): string | undefined {
  const { localAddress, localPort, remoteAddress, remotePort } = socket;
  if (localAddress === undefined || remoteAddress === undefined || localPort === undefined || remotePort === undefined) {
    return undefined;
  }
  const local = procAddress(localAddress);
  const remote = procAddress(remoteAddress);
  if (local === undefined || remote === undefined) return undefined;
  return `${local}:${procPort(localPort)} ${remote}:${procPort(remotePort)}`;
}

function procPort(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, "0");
}

/** /proc writes addresses as 32-bit words in host (little-endian) byte order. */
function procAddress(address: string): string | undefined {
  const bytes = isIPv4(address) ? ipv4Bytes(address) : ipv6Bytes(address);
  if (bytes === undefined) return undefined;
  let out = "";
  for (let word = 0; word < bytes.length; word += 4) {
    for (let i = 3; i >= 0; i--) out += bytes[word + i].toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

function ipv4Bytes(address: string): number[] {
  return address.split(".").map(Number);
}

function ipv6Bytes(address: string): number[] | undefined {
  let text = address.split("%", 1)[0];
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(":");
  if (isIPv4(text.slice(lastColon + 1))) {
    tail = ipv4Bytes(text.slice(lastColon + 1));
    text = text.slice(0, lastColon + 1) + "0:0";
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const h = groups(head);
  const r = rest === undefined ? [] : groups(rest);
  const missing = 8 - h.length - r.length;
  if (missing < 0 || (rest === undefined && missing !== 0)) return undefined;
  const all = [...h, ...Array<string>(missing).fill("0"), ...r];
  const bytes: number[] = [];
  for (const g of all) {
    const n = parseInt(g, 16);
    if (Number.isNaN(n)) return undefined;
    bytes.push(n >> 8, n & 0xff);
  }
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}
