/**
 * The operations console (the esbuild bundle in dist/console, built by
 * scripts/build-console.mjs) at `/` on the API port: a static site
 * (static-site.ts) with its headers and caching rules.
 */
import { createSiteHandler, packageDistDir, type NodeHandlerFn } from "./static-site.js";

export type { NodeHandlerFn } from "./static-site.js";

export interface ConsoleHandlerOptions {
  /** Called once at creation when `dir` holds no built console (no index.html). */
  onMissing?: (dir: string) => void;
}

/** The console's folder: `<package root>/dist/console`. */
export function defaultConsoleDir(): string {
  return packageDistDir("console");
}

export function createConsoleHandler(dir: string, options: ConsoleHandlerOptions = {}): NodeHandlerFn {
  return createSiteHandler(dir, {
    notBuiltText: "The operations console is not built. Run `npm run build`, then restart the server.\n",
    onMissing: options.onMissing,
  });
}
