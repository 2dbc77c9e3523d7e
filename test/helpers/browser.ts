/**
 * Debian's chromium driven by playwright-core, for the browser tests of the
 * console (test/browser/console.test.ts) and the API reference
 * (test/browser/docs.test.ts). Outside CI a missing /usr/bin/chromium skips
 * them; under CI=true it fails. Debian package: chromium.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type ConsoleMessage, type Page } from "playwright-core";
import { expect } from "vitest";

export const CHROMIUM = "/usr/bin/chromium";
export const IN_CI = process.env.CI === "true";
export const chromiumAvailable = existsSync(CHROMIUM);
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Screenshots (git-ignored). */
export const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts/", import.meta.url));
/**
 * The bound on one step a browser test waits for (an element, a call's answer
 * and its render, a live event): every locator's and page's default timeout.
 * A bound, not an expectation (docs/development.md "How a test waits"): each
 * step takes well under a second, and 15 s was once too little on CI's loaded
 * machine.
 */
export const UI_TIMEOUT_MS = 60_000;
/** A browser test's own timeout: a test takes seconds; this holds for many steps on a machine many times slower. */
export const TEST_TIMEOUT_MS = 240_000;

/** Reports CSP violations as console errors, which the tests collect. */
export const REPORT_CSP_VIOLATIONS = `
  document.addEventListener("securitypolicyviolation", (e) => {
    console.error("CSP violation: " + e.violatedDirective + " " + e.blockedURI);
  });
`;

/** Fails (under CI) or stops here when chromium is missing; builds a page with `script` when `built()` says it is not. */
export function prepareBrowserTest(script: string, built: () => boolean): void {
  expect(chromiumAvailable, `missing ${CHROMIUM} (Debian package chromium; CI=true turns this into a failure)`).toBe(true);
  // `npm test` builds it (pretest); `npx vitest run test/browser` alone may not have.
  if (!built()) execFileSync(process.execPath, [script], { cwd: REPO_ROOT, stdio: "inherit" });
  mkdirSync(ARTIFACTS, { recursive: true });
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-quic",
      "--no-first-run",
    ],
  });
}

export interface WatchedPage {
  page: Page;
  /** Console errors, uncaught exceptions and CSP violations seen so far. */
  errors: string[];
}

/**
 * A fresh tab (its own context and sessionStorage) that collects its errors.
 * `expectedStatus` drops Chromium's "Failed to load resource ... status of N"
 * lines for the answers a test provokes on purpose (e.g. /40[013]/).
 */
export async function openWatchedPage(browser: Browser, url: string, expectedStatus?: RegExp): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (msg: ConsoleMessage) => {
    if (msg.type() !== "error") return;
    const status = /^Failed to load resource: the server responded with a status of (\d+)/.exec(msg.text());
    if (status !== null && expectedStatus?.test(status[1])) return;
    errors.push(msg.text());
  });
  page.on("pageerror", (err) => errors.push(`uncaught: ${err.message}`));
  await page.addInitScript({ content: REPORT_CSP_VIOLATIONS });
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  await page.goto(url);
  return { page, errors };
}
