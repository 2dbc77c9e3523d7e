/**
 * Helpers for tests that drive LeaseQueue with programs outside this
 * process (buf, Python, promtool).
 *
 * Missing tools: outside CI such a test is skipped; under CI=true it runs and
 * fails with a message naming the missing tool (see `requireTool`), so a CI
 * image that lacks a package fails loudly instead of passing quietly.
 */
import { execFile, type ExecFileOptions } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";

export const IN_CI = process.env.CI === "true";

/** Repository root (this file is test/external/tools.ts). */
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program without a shell and resolves with its exit code and output
 * (a non-zero exit resolves; only a failure to start rejects). Async on
 * purpose: an in-process test server must keep serving meanwhile.
 */
export function run(file: string, args: readonly string[], options: ExecFileOptions & { input?: string } = {}): Promise<RunResult> {
  const { input, ...execOptions } = options;
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { encoding: "utf8", maxBuffer: 32 * 1024 * 1024, timeout: 60_000, ...execOptions },
      (error, stdout, stderr) => {
        const out = String(stdout);
        const err = String(stderr);
        if (error && typeof error.code !== "number") {
          // ENOENT, EACCES, killed by timeout, ...
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- an ExecFileException is an Error; @types/node builds its type with Omit<>, which the rule cannot see through
          reject(Object.assign(error, { stdout: out, stderr: err }));
          return;
        }
        resolve({ code: error ? (error.code as number) : 0, stdout: out, stderr: err });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** True when `file args...` starts and exits 0 (a probe such as `--version`). */
export async function works(file: string, args: readonly string[]): Promise<boolean> {
  try {
    return (await run(file, args, { timeout: 30_000 })).code === 0;
  } catch {
    return false;
  }
}

/** First line of a test that needs a tool: under CI a missing tool fails the test. */
export function requireTool(available: boolean, what: string): void {
  expect(available, `missing tool: ${what} (CI=true turns a missing tool into a failure)`).toBe(true);
}

/** Skip outside CI when a tool is missing; never skip under CI. */
export function skipUnlessAvailable(available: boolean): boolean {
  return !available && !IN_CI;
}
