/**
 * Bundles one browser page of the server (the console, the API reference)
 * into a folder the server serves as it is: empties `outdir`, bundles
 * `src/main.tsx` (Preact, esbuild) into app-<hash>.js and app-<hash>.css with
 * source maps, writes `src/index.html` with the hashed names filled in, and
 * copies the console's favicon. Returns the names of the files written
 * (without the maps) and their sizes, for the build's one-line report.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import * as esbuild from "esbuild";

/**
 * @param {{ root: string, src: string, outdir: string, beforeBundle?: () => void }} page
 * @returns {Promise<{ files: string[], sizes: (names: string[]) => string }>}
 */
export async function bundlePage({ root, src, outdir, beforeBundle }) {
  // Start empty: the server serves every file in this folder.
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  beforeBundle?.();

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
  const html = readFileSync(join(src, "index.html"), "utf8").replace("%APP_JS%", pick(".js")).replace("%APP_CSS%", pick(".css"));
  writeFileSync(join(outdir, "index.html"), html);
  copyFileSync(join(root, "src/console/favicon.svg"), join(outdir, "favicon.svg"));

  return {
    files: outputs.filter((name) => !name.endsWith(".map")),
    sizes: (names) => names.map((name) => `${name} ${(readFileSync(join(outdir, name)).length / 1024).toFixed(1)} KiB`).join(", "),
  };
}
