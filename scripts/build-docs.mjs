#!/usr/bin/env node
/**
 * Builds the API reference served at /docs (src/docs) into dist/docs/:
 *
 *   reference.json        no-cache; every service, RPC, message, field, enum
 *                         value (with the protos' own comments), bound and error
 *   index.html            no-cache; names the hashed bundle files
 *   app-<hash>.js (+.map) the page (Preact): renders reference.json, and a
 *                         "try it" form per RPC that sends Connect JSON
 *   app-<hash>.css (+.map)
 *   favicon.svg
 *
 * reference.json comes from `buf build --as-file-descriptor-set` (source info
 * included: the comments), read with @bufbuild/protobuf's file registry; the
 * bounds from dist/src/domain/request-bounds.js (their durations written by
 * dist/src/domain/duration-text.js), the roles from
 * dist/src/service/rpc-roles.js and the errors from
 * dist/src/service/error-table.js (so run after tsc: `npm run build` does).
 * Nothing is read from the Markdown docs. The server
 * (src/server/docs-files.ts) serves exactly the files found here at startup.
 */
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bundlePage } from "./lib/bundle-page.mjs";
import { describeApi } from "./docs/describe-api.mjs";
import { describeBounds } from "./docs/bounds.mjs";
import { describeErrors } from "./docs/errors.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src/docs");
const outdir = join(root, "dist/docs");

/** The protos as one FileDescriptorSet with source info (comments), from buf's npm package. */
function descriptorSet() {
  const buf = join(dirname(createRequire(import.meta.url).resolve("@bufbuild/buf/package.json")), "bin/buf");
  return execFileSync(process.execPath, [buf, "build", "--as-file-descriptor-set", "-o", "-#format=binpb"], {
    cwd: root,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"],
  });
}

/** A module compiled by tsc into dist/ (the build's first step). */
async function compiled(path) {
  const file = join(root, "dist", path);
  if (!existsSync(file)) throw new Error(`${relative(root, file)} is missing: run tsc first (npm run build does)`);
  return import(pathToFileURL(file).href);
}

const requestBounds = await compiled("src/domain/request-bounds.js");
const durationText = await compiled("src/domain/duration-text.js");
const { RPC_ROLES } = await compiled("src/service/rpc-roles.js");
const { ERROR_TABLE } = await compiled("src/service/error-table.js");

const reference = {
  ...describeApi(descriptorSet(), {
    services: ["leasequeue.v1.LeaseQueueService", "grpc.health.v1.Health"],
    // The error details the server sends (docs/api.md "Errors").
    extraMessages: ["google.rpc.ErrorInfo", "google.rpc.BadRequest"],
    roleOf: (service, method) => (service === "leasequeue.v1.LeaseQueueService" ? RPC_ROLES[method] : undefined),
  }),
  bounds: describeBounds(requestBounds, durationText),
  errors: describeErrors(ERROR_TABLE),
};

const page = await bundlePage({
  root,
  src,
  outdir,
  beforeBundle: () => writeFileSync(join(outdir, "reference.json"), JSON.stringify(reference)),
});
const sizes = page.sizes([...page.files, "reference.json"]);
// `npm run build --silent` (npm start) stays quiet.
if (process.env.npm_config_loglevel !== "silent") {
  const counts = `${reference.services.reduce((n, s) => n + s.methods.length, 0)} RPCs, ${reference.messages.length} messages, ${reference.enums.length} enums`;
  console.log(`API reference built into ${relative(process.cwd(), outdir) || "."} (${counts}): ${sizes}`);
}
