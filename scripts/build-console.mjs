#!/usr/bin/env node
/**
 * Builds the operations console (src/console) into dist/console/:
 *
 *   index.html            no-cache; names the hashed bundle files
 *   app-<hash>.js (+.map) the bundle (Preact, connect-web, generated client)
 *   app-<hash>.css (+.map)
 *   favicon.svg
 *
 * The server (src/server/console-files.ts) serves exactly the files found
 * here at startup. Run through `npm run build`.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src/console");
const outdir = join(root, "dist/console");

// Start empty: the server serves every file in this folder.
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: join(src, "main.tsx") },
  entryNames: "[name]-[hash]",
  outdir,
  bundle: true,
  minify: true,
  sourcemap: true,
  format: "esm",
  platform: "browser",
  target: ["es2022", "chrome111", "firefox111", "safari16"],
  jsx: "automatic",
  jsxImportSource: "preact",
  tsconfig: join(src, "tsconfig.json"),
  define: { "process.env.NODE_ENV": '"production"' },
  legalComments: "linked",
  metafile: true,
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
const pick = (ext) => {
  const found = outputs.filter((name) => name.startsWith("app-") && name.endsWith(ext));
  if (found.length !== 1) throw new Error(`expected one app-*${ext} output, got: ${outputs.join(", ")}`);
  return found[0];
};
const js = pick(".js");
const css = pick(".css");

const html = readFileSync(join(src, "index.html"), "utf8").replace("%APP_JS%", js).replace("%APP_CSS%", css);
writeFileSync(join(outdir, "index.html"), html);
copyFileSync(join(src, "favicon.svg"), join(outdir, "favicon.svg"));

const sizes = outputs
  .filter((name) => !name.endsWith(".map"))
  .map((name) => `${name} ${(readFileSync(join(outdir, name)).length / 1024).toFixed(1)} KiB`);
// `npm run build --silent` (npm start) stays quiet.
if (process.env.npm_config_loglevel !== "silent")
  console.log(`console built into ${relative(process.cwd(), outdir) || "."}: ${sizes.join(", ")}`);
