/**
 * The API reference (dist/docs, built by scripts/build-docs.mjs from the
 * protos' own comments) at `/docs` on the API port: a static site
 * (static-site.ts) with the console's headers and caching rules, in front
 * of the console. Off in production unless LEASEQUEUE_DOCS=on; then `/docs`
 * is a 404 that says so.
 */
import { createSiteHandler, packageDistDir, requestPath, sendText, type NodeHandlerFn } from "./static-site.js";

/** Where the reference answers; everything under it is the reference's. */
export const DOCS_BASE_PATH = "/docs";

export interface ApiReferenceOptions {
  /** Serve the reference (config.docs); false answers 404 under `/docs`. */
  enabled: boolean;
  /** The built reference; default `<package root>/dist/docs`. */
  dir?: string;
  /** Called once at creation when the reference is enabled but not built. */
  onMissing?: (dir: string) => void;
}

/** The reference's folder: `<package root>/dist/docs`. */
export function defaultDocsDir(): string {
  return packageDistDir("docs");
}

/** True for `/docs` and every path under `/docs/`. */
export function isDocsPath(path: string): boolean {
  return path === DOCS_BASE_PATH || path.startsWith(`${DOCS_BASE_PATH}/`);
}

/** Sends `/docs` and the paths under it to the API reference, everything else to `next`. */
export function withApiReference(next: NodeHandlerFn, options: ApiReferenceOptions): NodeHandlerFn {
  const docs = options.enabled
    ? createSiteHandler(options.dir ?? defaultDocsDir(), {
        basePath: DOCS_BASE_PATH,
        notBuiltText: "The API reference is not built. Run `npm run build`, then restart the server.\n",
        onMissing: options.onMissing,
      })
    : undefined;
  return (req, res) => {
    if (!isDocsPath(requestPath(req.url))) {
      next(req, res);
    } else if (docs === undefined) {
      sendText(res, 404, "Not found: the API reference is off (production mode); LEASEQUEUE_DOCS=on serves it at /docs.\n");
    } else {
      docs(req, res);
    }
  };
}
