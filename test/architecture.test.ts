/**
 * Every layering rule of ARCHITECTURE.md, run over src/: an import only
 * ever points down.
 *
 * - The server's floors: cli.ts -> app.ts and commands/ -> telemetry/ (the
 *   OpenTelemetry SDK, behind the small interfaces of server/ and domain/) -> server/ ->
 *   service/ -> dispatch/ and maintenance/ (side by side, neither importing
 *   the other) -> store/ -> domain/, with the leaves metrics/, config/
 *   and logger.ts used from above, and gen/ (the wire types)
 *   only from service/ up. Inside store/, each engine keeps to itself:
 *   sqlite/ and postgres/ never import each other, and of the shared files
 *   only engine.ts opens them.
 * - What keeps a second engine an adapter, not a copy: store code outside
 *   an engine's folder is engine-neutral (it imports nothing of SQLite), and
 *   the server and the command line reach a database only through
 *   store/engine.ts (the commands that are SQLite-only by nature, backup,
 *   check, restore and import-litequeue, are the exceptions).
 * - The worker SDK (`leasequeue/worker`) must run in a worker process
 *   without the server: src/worker imports only packages, gen/, its own
 *   files and the domain modules that import nothing but each other (the
 *   bounds table src/domain/request-bounds.ts, the nesting bound, the
 *   backoff formula), so sharing a rule with the server drags no server
 *   code in.
 * - The browser pages run without the server: the operations console
 *   (src/console) imports only packages, gen/, its own folder and the
 *   domain modules that import nothing else (a rule it shares with the
 *   server, such as how a duration is written), and the API reference
 *   (src/docs) not even gen/ (it reads everything it shows from
 *   reference.json, built by scripts/build-docs.mjs).
 * - The fast wire (server/fast-wire/README.md) is one fenced folder: the
 *   rest of src/ reaches it only through its index.ts, from app.ts (which
 *   wires it in or leaves it out) and rpc-handler.ts; the service sees it
 *   only through service/hand-wire.ts. Connect's protocol internals and
 *   protobuf-es's wire reader and writer are used there, and elsewhere only
 *   by the files named below, each for a reason of its own.
 * - A file holds one concern, and none under src/ is over 600 lines.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "./helpers/process.js";

/** The specifiers a file (a repository path) imports or re-exports, side-effect imports included. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(PACKAGE_ROOT, file), "utf8");
  return [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gms)].map((m) => m[1] ?? m[2]);
}

/**
 * The files of src/domain that import nothing but other such files (no
 * package, no Node built-in), as `name.js`: importing one brings no server
 * code and nothing Node-only, so the worker SDK and the console may.
 */
function selfContainedDomainModules(): Set<string> {
  const imports = new Map(
    readdirSync(join(PACKAGE_ROOT, "src/domain"))
      .filter((f) => f.endsWith(".ts"))
      .map((f) => [f.replace(/\.ts$/, ".js"), importsOf(`src/domain/${f}`)] as const),
  );
  const contained = new Set<string>();
  for (let grew = true; grew;) {
    grew = false;
    for (const [file, specifiers] of imports) {
      if (contained.has(file)) continue;
      if (specifiers.every((s) => s.startsWith("./") && contained.has(s.slice(2)))) {
        contained.add(file);
        grew = true;
      }
    }
  }
  return contained;
}

/** The source files under `dir` (a repository path), as repository paths. */
function sourcesIn(dir: string): string[] {
  return readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => /\.tsx?$/.test(f))
    .map((f) => `${dir}/${f}`);
}

/** Each unit's floor: a unit imports only units on lower floors (and its own files). */
const FLOORS: Record<string, number> = {
  // Test helpers (a manual clock, a silent logger): above everything, so nothing the server runs imports them.
  "src/testing": 11,
  "src/cli.ts": 10,
  "src/app.ts": 9,
  "src/commands": 9,
  "src/telemetry": 8.5,
  "src/server": 8,
  "src/service": 7,
  gen: 6.5,
  "src/dispatch": 6,
  "src/maintenance": 6,
  "src/metrics": 5,
  "src/store": 4,
  "src/config": 3,
  "src/logger.ts": 2,
  "src/domain": 1,
};

/** Checked on their own below: they run beside the server, not on its floors. */
const BESIDE = ["src/worker", "src/console", "src/docs"];

/** The unit a repository path belongs to: its top folder under src/, or the file itself. */
function unitOf(path: string): string {
  const parts = path.split("/");
  if (parts[0] === "gen") return "gen";
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : path;
}

const files = sourcesIn("src").filter((f) => !BESIDE.some((dir) => f.startsWith(`${dir}/`)));

/** The repository paths a file imports (relative imports only; packages are not ours). */
function targetsOf(file: string): string[] {
  return importsOf(file)
    .filter((s) => s.startsWith("."))
    .map((s) => relative(PACKAGE_ROOT, resolve(PACKAGE_ROOT, dirname(file), s)).replace(/\.js$/, ".ts"));
}

describe("the server's floors", () => {
  it("knows every unit under src/", () => {
    const units = new Set(files.map(unitOf));
    expect([...units].filter((u) => FLOORS[u] === undefined)).toEqual([]);
  });

  it.each(files)("%s imports only its own unit and lower floors", (file) => {
    const unit = unitOf(file);
    const upward = targetsOf(file).filter((target) => {
      const to = unitOf(target);
      return to !== unit && !(FLOORS[to] < FLOORS[unit]);
    });
    expect(upward).toEqual([]);
  });

  it("keeps maintenance/ on dispatch's floor: imported only from above it, importing only store/, domain/ and the logger", () => {
    const importers = files.filter((f) => targetsOf(f).some((t) => unitOf(t) === "src/maintenance")).map(unitOf);
    expect(importers.filter((u) => !(FLOORS[u] > FLOORS["src/maintenance"]))).toEqual([]);
    const imported = new Set(files.filter((f) => unitOf(f) === "src/maintenance").flatMap((f) => targetsOf(f).map(unitOf)));
    expect([...imported].filter((u) => !["src/maintenance", "src/store", "src/domain", "src/logger.ts"].includes(u))).toEqual([]);
    expect(importers).toContain("src/app.ts");
  });

  it("keeps each engine to itself: only store/engine.ts of the shared files opens one", () => {
    const engineOf = (path: string) => /^src\/store\/(sqlite|postgres)\//.exec(path)?.[1];
    const crossing = files
      .filter((f) => f.startsWith("src/store/"))
      .flatMap((f) => targetsOf(f).map((t) => ({ from: f, to: t })))
      .filter(({ from, to }) => engineOf(to) !== undefined && engineOf(from) !== engineOf(to) && from !== "src/store/engine.ts");
    expect(crossing).toEqual([]);
  });
});

describe("the fast wire behind one fence", () => {
  const FENCE = "src/server/fast-wire/";
  const all = sourcesIn("src");

  it("is reached from outside only through its index.ts, by app.ts and rpc-handler.ts", () => {
    const crossings = all
      .filter((f) => !f.startsWith(FENCE))
      .flatMap((f) =>
        targetsOf(f)
          .filter((t) => t.startsWith(FENCE))
          .map((t) => `${f} -> ${t}`),
      );
    expect(crossings.sort()).toEqual([
      "src/app.ts -> src/server/fast-wire/index.ts",
      "src/server/rpc-handler.ts -> src/server/fast-wire/index.ts",
    ]);
  });

  /** Files outside the fence that use connect's protocol internals or protobuf-es's wire format, and why. */
  const OUTSIDE: Record<string, string> = {
    "src/server/rpc-handler.ts": "the API port's own Node adapter (both wire modes): routes URLs, validates options, words refusals",
    "src/server/call-outcome.ts":
      "rewrites connect's `internal` for an undecodable request into invalid_argument, in each protocol (both modes)",
    "src/server/protocol-refusal.ts": "answers a call refused before connect reads it, in the request's protocol",
    "src/telemetry/rpc-server-spans.ts": "the code name of a span's status",
    "src/worker/lease-decoding.ts": "the worker SDK's own lease reader (it may not import the server)",
  };

  it("holds every use of connect's protocol internals and protobuf-es's wire format but the named few", () => {
    const users = all.filter((f) =>
      importsOf(f).some((s) => s.startsWith("@connectrpc/connect/protocol") || s === "@bufbuild/protobuf/wire"),
    );
    expect(users.filter((f) => !f.startsWith(FENCE)).sort()).toEqual(Object.keys(OUTSIDE).sort());
  });
});

describe("engine-neutral store code", () => {
  const sqliteImports = (file: string) => importsOf(file).filter((s) => s === "better-sqlite3" || s.includes("sqlite/"));
  // Every file of store/ outside the two engines' folders, but engine.ts, which opens them.
  const neutral = (readdirSync(join(PACKAGE_ROOT, "src/store"), { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts") && !/^(sqlite|postgres)\//.test(f) && f !== "engine.ts")
    .map((f) => `src/store/${f}`);

  it.each(neutral)("%s imports nothing of SQLite", (file) => {
    expect(sqliteImports(file)).toEqual([]);
  });

  it.each(["src/app.ts", "src/cli.ts", "src/commands/prune.ts"])("%s opens databases only through store/engine.ts", (file) => {
    expect(sqliteImports(file)).toEqual([]);
    expect(importsOf(file).some((s) => s.endsWith("store/engine.js"))).toBe(true);
  });
});

describe("tracing loaded on demand", () => {
  /** The specifiers a file imports for their values (an `import type` brings nothing in at run time). */
  const valueImportsOf = (file: string) => {
    const text = readFileSync(join(PACKAGE_ROOT, file), "utf8");
    return [...text.matchAll(/^\s*(?:import|export)\s(?!type\s)[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gms)].map((m) => m[1] ?? m[2]);
  };

  it("no file the server loads at start imports OpenTelemetry: telemetry/tracing.ts loads the SDK only when an exporter is configured", () => {
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const s of valueImportsOf(file)) {
        if (!s.startsWith(".")) packages.add(s);
        else visit(relative(PACKAGE_ROOT, resolve(PACKAGE_ROOT, dirname(file), s)).replace(/\.js$/, ".ts"));
      }
    };
    visit("src/cli.ts");
    expect(seen).toContain("src/telemetry/tracing.ts");
    expect(seen).not.toContain("src/telemetry/otel-tracing.ts");
    expect([...packages].filter((p) => p.startsWith("@opentelemetry/"))).toEqual([]);
  });
});

describe("the worker SDK's imports", () => {
  const sdkFiles = readdirSync(join(PACKAGE_ROOT, "src/worker")).filter((f) => f.endsWith(".ts"));
  const shared = selfContainedDomainModules();

  it.each(sdkFiles)("%s imports only packages, gen/, its own folder and self-contained domain modules", (file) => {
    const relativeImports = importsOf(`src/worker/${file}`).filter((s) => s.startsWith("."));
    const outside = relativeImports.filter(
      (s) =>
        !s.startsWith("./") && !s.startsWith("../../gen/") && !(s.startsWith("../domain/") && shared.has(s.slice("../domain/".length))),
    );
    expect(outside).toEqual([]);
  });

  it("domain/request-bounds.ts imports nothing at all", () => {
    expect(importsOf("src/domain/request-bounds.ts")).toEqual([]);
  });

  it("counts as self-contained only the domain modules that bring nothing else in", () => {
    expect(shared).toContain("request-bounds.js");
    expect(shared).toContain("json-depth.js");
    // ids.ts imports the uuid package; state-machine.ts, through lease-token.ts, node:crypto.
    expect(shared).not.toContain("ids.js");
    expect(shared).not.toContain("state-machine.js");
  });

  it("validation, the state machine and the SDK's checks take their bounds and defaults from it", () => {
    expect(importsOf("src/service/validate.ts")).toContain("../domain/request-bounds.js");
    expect(importsOf("src/domain/state-machine.ts")).toContain("./request-bounds.js");
    expect(importsOf("src/worker/worker-options.ts")).toContain("../domain/request-bounds.js");
    expect(importsOf("src/worker/result-checks.ts")).toContain("../domain/request-bounds.js");
  });
});

describe("the browser pages' imports", () => {
  const docs = sourcesIn("src/docs");
  const consoleFiles = sourcesIn("src/console");

  it.each(docs)("%s imports only preact and its own folder", (file) => {
    const imports = importsOf(file);
    expect(imports.filter((s) => !s.startsWith("./") && s !== "preact" && !s.startsWith("preact/"))).toEqual([]);
  });

  it.each(consoleFiles)("%s imports only packages, gen/, its own folder and self-contained domain modules", (file) => {
    const depth = relative("src/console", file).split("/").length - 1;
    const gen = `${"../".repeat(depth + 2)}gen/`;
    const domain = `${"../".repeat(depth + 1)}domain/`;
    const shared = selfContainedDomainModules();
    const own = depth === 0 ? ["./"] : ["./", "../"];
    const relativeImports = importsOf(file).filter((s) => s.startsWith("."));
    const outside = relativeImports.filter(
      (s) =>
        !s.startsWith(gen) &&
        !(s.startsWith(domain) && shared.has(s.slice(domain.length))) &&
        !(own.some((p) => s.startsWith(p)) && !s.includes("../../")),
    );
    expect(outside).toEqual([]);
  });
});

describe("the size of a file", () => {
  it.each(sourcesIn("src"))("%s is at most 600 lines", (file) => {
    const lines = readFileSync(join(PACKAGE_ROOT, file), "utf8").split("\n").length - 1;
    expect(lines).toBeLessThanOrEqual(600);
  });
});
