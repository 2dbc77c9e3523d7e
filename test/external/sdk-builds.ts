/**
 * Builds of the Python and Go SDKs (clients/python, clients/go) the way their
 * README.md files say, for the tests that run them: a venv over Debian's
 * grpcio with `pip install --no-deps --no-build-isolation`, and Go in GOPATH
 * mode from Debian's packages, offline.
 *
 * The Python build runs on a copy of clients/python and gen/python (setup.py
 * copies the generated stubs in from ../../gen/python), so that test files
 * running at once never share a build/ directory, and the checkout stays
 * clean.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, run, works } from "./tools.js";

/** Debian's interpreter: another python3 earlier on PATH may lack the modules. */
export const SYSTEM_PYTHON = "/usr/bin/python3";
export const PYTHON_TOOLS = "/usr/bin/python3 with python3-grpcio, python3-protobuf, python3-venv and python3-pip";
export const pythonAvailable =
  (await works(SYSTEM_PYTHON, ["-c", "import grpc, google.protobuf, venv, ensurepip"])) &&
  (await works(SYSTEM_PYTHON, ["-m", "pip", "--version"]));

const GOCODE = "/usr/share/gocode";
export const GO_TOOLS =
  "go (golang-go) with golang-google-grpc-dev, golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev and golang-google-genproto-dev";
export const goAvailable =
  (await works("go", ["version"])) &&
  existsSync(join(GOCODE, "src/google.golang.org/grpc/server.go")) &&
  existsSync(join(GOCODE, "src/google.golang.org/protobuf/proto/proto.go")) &&
  existsSync(join(GOCODE, "src/google.golang.org/genproto/googleapis/rpc/errdetails")) &&
  // registry.go exists from golang/protobuf 1.4 on: with the 1.3 package grpc
  // compiles and then panics on the first call.
  existsSync(join(GOCODE, "src/github.com/golang/protobuf/proto/registry.go"));
/** The Go SDK's `otel` build tag (clients/go/tracing_otel.go): OpenTelemetry's API, SDK and tracetest. */
export const GO_OTEL_TOOLS = "golang-opentelemetry-otel-dev (go.opentelemetry.io/otel with sdk/trace/tracetest)";
export const goOtelAvailable = goAvailable && existsSync(join(GOCODE, "src/go.opentelemetry.io/otel/sdk/trace/tracetest/recorder.go"));

/** Directories the builds of this process made, for removeBuilds(). */
const made: string[] = [];

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every venv and GOPATH this process built (call from afterAll). */
export function removeBuilds(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * A venv with the leasequeue package installed; returns its python. Throws
 * with pip's output when the install fails.
 */
export async function installPythonSdk(): Promise<string> {
  const dir = tempDir("leasequeue-py-sdk-");
  const source = join(dir, "src");
  cpSync(join(REPO_ROOT, "clients/python"), join(source, "clients/python"), {
    recursive: true,
    filter: (path) => !/\/(build|[^/]*\.egg-info|__pycache__)$/.test(path),
  });
  cpSync(join(REPO_ROOT, "gen/python"), join(source, "gen/python"), { recursive: true });
  const venv = join(dir, "venv");
  const made = await run(SYSTEM_PYTHON, ["-m", "venv", "--system-site-packages", venv], { timeout: 120_000 });
  if (made.code !== 0) throw new Error(`python3 -m venv failed:\n${made.stderr}`);
  const python = join(venv, "bin/python");
  // From another directory than the source: the package must not depend on the working directory.
  const pip = await run(
    python,
    ["-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", join(source, "clients/python")],
    {
      cwd: dir,
      timeout: 180_000,
      env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1", PYTHONDONTWRITEBYTECODE: "1" },
    },
  );
  if (pip.code !== 0) throw new Error(`pip install clients/python failed:\n${pip.stdout}\n${pip.stderr}`);
  return python;
}

export interface GoWorkspace {
  /** The environment of `go` in GOPATH mode, offline. */
  env: NodeJS.ProcessEnv;
  /** A directory for binaries and the build cache. */
  dir: string;
}

/** A GOPATH whose src/leasequeue is this repository, with Debian's /usr/share/gocode after it. */
export function goWorkspace(): GoWorkspace {
  const dir = tempDir("leasequeue-gopath-");
  mkdirSync(join(dir, "src"));
  symlinkSync(REPO_ROOT.replace(/\/$/, ""), join(dir, "src", "leasequeue"));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GO111MODULE: "off",
    GOPATH: `${dir}:${GOCODE}`,
    GOPROXY: "off",
    GOFLAGS: "",
    // A build cache is needed; keep the user's if there is a home for it.
    ...(process.env.HOME || process.env.GOCACHE || process.env.XDG_CACHE_HOME ? {} : { GOCACHE: join(dir, "cache") }),
  };
  return { env, dir };
}

/** `go build` of an import path under leasequeue/ into the workspace; returns the binary. */
export async function goBuild(ws: GoWorkspace, importPath: string, name: string): Promise<string> {
  const bin = join(ws.dir, name);
  const build = await run("go", ["build", "-o", bin, importPath], { cwd: ws.dir, env: ws.env, timeout: 300_000 });
  if (build.code !== 0) throw new Error(`go build ${importPath} failed:\n${build.stderr}`);
  return bin;
}
