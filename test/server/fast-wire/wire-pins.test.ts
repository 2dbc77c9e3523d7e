/**
 * The server's hand-written wire paths stand in for connect-es's and
 * protobuf-es's own (docs/performance.md "Where the CPU goes"): unary gRPC,
 * gRPC framing and trailers, header conversion, the hand encoders of leases,
 * submit answers and events, and the hand decoders of submits and
 * acknowledgements. They were written against exact versions of those
 * libraries and are proven equal to them by the equivalence tests named
 * below. So the versions are pinned exactly, and this test fails when one
 * changes, naming what to run again before it may.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../../helpers/process.js";

/** Each library the hand paths mirror: the version they were proven against, and what proves them. */
const PINNED = {
  "@bufbuild/protobuf": {
    version: "2.13.0",
    mirroredBy: [
      "src/server/fast-wire/proto-writer.ts",
      "src/server/fast-wire/lease-encoding.ts",
      "src/server/fast-wire/submit-decoding.ts",
      "src/server/fast-wire/ack-decoding.ts",
    ],
    proofs: [
      "test/server/fast-wire/lease-encoding.test.ts",
      "test/server/fast-wire/submit-decoding.test.ts",
      "test/server/fast-wire/ack-decoding.test.ts",
    ],
  },
  "@connectrpc/connect": {
    version: "2.1.2",
    mirroredBy: [
      "src/server/fast-wire/grpc-unary.ts",
      "src/server/fast-wire/grpc-envelope.ts",
      "src/server/call-outcome.ts",
      "src/server/rpc-handler.ts",
    ],
    proofs: ["test/server/fast-wire/grpc-unary.test.ts", "test/hostile/malformed-bodies.test.ts"],
  },
  "@connectrpc/connect-node": {
    version: "2.1.2",
    mirroredBy: ["src/server/fast-wire/node-headers.ts", "src/server/fast-wire/kernel-send-queue.ts"],
    proofs: ["test/server/fast-wire/grpc-unary.test.ts", "test/server/fast-wire/kernel-send-queue.test.ts"],
  },
} as const;

const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };

describe.each(Object.entries(PINNED))("%s", (name, pin) => {
  const advice =
    `${name} moved from ${pin.version}: the hand paths in ${pin.mirroredBy.join(", ")} mirror its internals; ` +
    `run ${pin.proofs.join(", ")} against the new version, fix what differs, then update the pin here`;

  it("is pinned exactly in package.json, at the version the hand paths were proven against", () => {
    expect(manifest.dependencies[name], advice).toBe(pin.version);
  });

  it("is installed at that version", () => {
    const installed = JSON.parse(readFileSync(join(PACKAGE_ROOT, "node_modules", name, "package.json"), "utf8")) as { version: string };
    expect(installed.version, advice).toBe(pin.version);
  });

  it("names files that exist", () => {
    for (const file of [...pin.mirroredBy, ...pin.proofs]) expect(() => readFileSync(join(PACKAGE_ROOT, file)), file).not.toThrow();
  });
});
