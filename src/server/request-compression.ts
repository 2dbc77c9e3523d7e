/**
 * Which request encodings the API port decompresses, and with what bounds.
 *
 * connect-node accepts gzip and brotli unless told otherwise. Brotli lets a
 * request of a few hundred bytes declare a 16 MiB sliding window that the
 * decoder allocates while inflating, whatever the decompressed size; 400 such
 * requests at once once held 6.7 GB. So gzip is the default, and brotli is
 * accepted only when configured, with its window and its concurrency bounded.
 * Both keep the adapter's `readMaxBytes` as the decompressed size limit.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { RequestCompression } from "../config/config.js";

/** connect's Compression shape (not exported under a stable name by connect-node). */
export type Compression = typeof compressionGzip;

/**
 * Largest brotli window accepted: 2^22 bytes (4 MiB), the default window of
 * the reference encoder and of Node's zlib, so ordinary clients pass.
 */
export const MAX_BROTLI_WINDOW_BITS = 22;

/** Brotli decompressions running at once; the rest wait their turn. */
export const MAX_CONCURRENT_BROTLI_DECOMPRESSIONS = 4;

/**
 * The sliding window size (log2) that a brotli stream declares in its first
 * bits (RFC 7932 §9.1), or "large" for the large-window extension, or
 * undefined if the bytes are too short to tell.
 */
export function brotliWindowBits(stream: Uint8Array): number | "large" | undefined {
  if (stream.length === 0) return undefined;
  // All seven header bits are in the first byte, least significant first.
  const bits = stream[0];
  if ((bits & 1) === 0) return 16;
  const n = (bits >> 1) & 0b111;
  if (n !== 0) return 17 + n;
  const m = (bits >> 4) & 0b111;
  if (m === 1) return "large";
  return m === 0 ? 17 : 8 + m;
}

/** A counting semaphore: at most `limit` holders, the rest queue in order. */
function createSemaphore(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (task) => {
    if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/**
 * Brotli with its window refused above {@link MAX_BROTLI_WINDOW_BITS} before
 * any decoder is created, and at most `maxConcurrent` decompressions at once,
 * so brotli costs at most maxConcurrent × 4 MiB of windows.
 */
export function createBoundedBrotli(maxConcurrent = MAX_CONCURRENT_BROTLI_DECOMPRESSIONS): Compression {
  const oneAtATime = createSemaphore(maxConcurrent);
  return {
    name: compressionBrotli.name,
    compress: (bytes) => compressionBrotli.compress(bytes),
    decompress(bytes, readMaxBytes) {
      const windowBits = brotliWindowBits(bytes);
      if (windowBits === "large" || (windowBits !== undefined && windowBits > MAX_BROTLI_WINDOW_BITS)) {
        const declared = windowBits === "large" ? "a large window (RFC 7932 extension)" : `a window of 2^${windowBits} bytes`;
        return Promise.reject(
          new ConnectError(
            `brotli request body declares ${declared}; the limit is 2^${MAX_BROTLI_WINDOW_BITS} bytes`,
            Code.ResourceExhausted,
          ),
        );
      }
      return oneAtATime(() => compressionBrotli.decompress(bytes, readMaxBytes));
    },
  };
}

/**
 * The `acceptCompression` list for the adapter, in the configured order.
 * Empty means identity only: a compressed request is answered with the
 * protocol's "unsupported encoding" error (`unimplemented`).
 */
export function acceptedCompressions(names: readonly RequestCompression[]): Compression[] {
  return names.map((name) => (name === "gzip" ? compressionGzip : createBoundedBrotli()));
}
