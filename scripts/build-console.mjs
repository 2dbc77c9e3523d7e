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
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { bundlePage } from "./lib/bundle-page.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src/console");
const outdir = join(root, "dist/console");

const page = await bundlePage({ root, src, outdir });
// `npm run build --silent` (npm start) stays quiet.
if (process.env.npm_config_loglevel !== "silent")
  console.log(`console built into ${relative(process.cwd(), outdir) || "."}: ${page.sizes(page.files)}`);
