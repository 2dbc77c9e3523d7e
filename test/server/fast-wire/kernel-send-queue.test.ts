/**
 * The kernel's send queue of a connection, as WatchEvents uses it to tell a
 * client that never reads on HTTP/1.1: read from a fixture in /proc's
 * format, and from the real /proc with a peer that really does not read.
 */
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { KernelSendQueues } from "../../../src/server/fast-wire/kernel-send-queue.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const fn of cleanups.splice(0).reverse()) fn();
});

/** A connected pair on loopback: `served` is the server's end, `peer` the client's (paused: it never reads). */
async function connectedPair(host = "127.0.0.1", listenHost = host): Promise<{ served: net.Socket; peer: net.Socket }> {
  const server = net.createServer();
  server.listen(0, listenHost);
  await once(server, "listening");
  const accepted = once(server, "connection") as Promise<[net.Socket]>;
  const peer = net.connect({ host, port: (server.address() as net.AddressInfo).port });
  peer.pause();
  const [served] = await accepted;
  cleanups.push(() => {
    peer.destroy();
    served.destroy();
    server.close();
  });
  return { served, peer };
}

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, "0");
}

describe("KernelSendQueues", () => {
  it("reads a socket's tx_queue from /proc's format, only once more than minBytes may be unread", async () => {
    const { served } = await connectedPair();
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-proc-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, "tcp");
    const addr = "0100007F"; // 127.0.0.1, as /proc writes it
    const line = (local: number, remote: number, state: string, tx: number) =>
      `   0: ${addr}:${hex(local, 4)} ${addr}:${hex(remote, 4)} ${state} ${hex(tx, 8)}:00000000 00:00000000 00000000 0 0 1 1`;
    writeFileSync(
      file,
      [
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
        line(served.localPort!, served.remotePort!, "01", 0x12345),
        line(served.localPort!, served.remotePort! + 1, "01", 0x999), // another connection
        "",
      ].join("\n"),
    );
    const queues = new KernelSendQueues({ files: [file], intervalMs: 0 });
    const probe = queues.probe(served, 1000);
    const queued = probe.queued;

    expect(queued()).toBe(0); // nothing written: no sample needed
    await queues.sampled();
    served.write(Buffer.alloc(2000));
    await new Promise<void>((resolve) => served.write("", () => resolve()));
    expect(queued()).toBe(0); // a sample starts now
    await queues.sampled();
    expect(queued()).toBe(0x12345);
  });

  it.skipIf(!existsSync("/proc/self/net/tcp")).each([
    ["127.0.0.1", "127.0.0.1"],
    ["::1", "::1"],
    ["127.0.0.1", "::"], // IPv4 peer of a dual-stack listener: ::ffff:127.0.0.1 in tcp6
  ])("sees megabytes queued in the kernel for a peer that never reads (%s to a listener on %s)", async (host, listenHost) => {
    const { served } = await connectedPair(host, listenHost);
    const queues = new KernelSendQueues({ intervalMs: 0 });
    const probe = queues.probe(served, 64 * 1024);
    const queued = probe.queued;
    // Write until Node itself has to buffer: the kernel holds the rest.
    const chunk = Buffer.alloc(64 * 1024, 1);
    while (served.write(chunk)) {
      if (served.bytesWritten > 64 * 1024 * 1024) throw new Error("the kernel accepted 64 MiB for a peer that never reads");
    }
    const inKernel = served.bytesWritten - served.writableLength;
    queued();
    await queues.sampled();
    console.log(`kernel send queue: ${queued()} bytes queued in the kernel (Node handed it ${inKernel})`);
    expect(queued()).toBeGreaterThan(256 * 1024);
    expect(queued()).toBeLessThanOrEqual(served.bytesWritten);
    // What the peer's own buffer took counts as taken; the rest stays
    // unconfirmed (up to the chunk Node is still handing over).
    expect(Math.abs(probe.unconfirmed() - queued())).toBeLessThan(chunk.length);
    await probe.nextSample();
    expect(probe.unconfirmed()).toBeGreaterThan(256 * 1024);
  });
});
