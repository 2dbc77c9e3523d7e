// Module hooks that let a worker thread run the TypeScript sources as the
// tests do (vitest transforms the tests' own imports; a Worker started from
// them loads its entry with Node's loader, which knows no TypeScript).
// Registered by register-typescript.mjs through vitest.config.ts's execArgv,
// which worker threads inherit. Types are stripped by esbuild, not checked.
// Each compiled file is kept under node_modules/.cache/ by path, size and
// modification time, so that a new thread compiles nothing unchanged.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const cacheDir = fileURLToPath(new URL("../../node_modules/.cache/leasequeue-typescript/", import.meta.url));
let esbuild;

export function resolve(specifier, context, next) {
  const parent = context.parentURL;
  if (parent?.endsWith(".ts") && specifier.startsWith(".") && specifier.endsWith(".js")) {
    const ts = new URL(specifier.slice(0, -3) + ".ts", parent);
    if (existsSync(fileURLToPath(ts))) return { url: ts.href, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return next(url, context);
  const path = fileURLToPath(url);
  const { size, mtimeMs } = statSync(path);
  const cached = `${cacheDir}${createHash("sha1").update(`${path}\0${size}\0${mtimeMs}`).digest("hex")}.js`;
  if (existsSync(cached)) return { format: "module", source: readFileSync(cached, "utf8"), shortCircuit: true };
  esbuild ??= await import("esbuild");
  const { code } = await esbuild.transform(readFileSync(path, "utf8"), {
    loader: "ts",
    format: "esm",
    target: "node20",
    sourcemap: "inline",
    sourcefile: path,
  });
  mkdirSync(cacheDir, { recursive: true });
  writeFileSync(`${cached}.${process.pid}.tmp`, code);
  const { renameSync } = await import("node:fs");
  renameSync(`${cached}.${process.pid}.tmp`, cached);
  return { format: "module", source: code, shortCircuit: true };
}
