/**
 * The API reference at /docs in a real browser: Debian's chromium driven by
 * playwright-core, against a real server on a free port.
 *
 * Flows: /docs carries the console's security headers and runs without a
 * console error or CSP violation; every RPC and every field of every message
 * is on the page; Submit is found with the filter and its example creates a
 * job; a bad body shows `invalid_argument` with the field; Submit, Claim and
 * Complete run from the page (the test pastes Claim's lease token into
 * Complete's body); a server stream (WatchEvents) shows its events and
 * stops; the console's header links here. With authentication on: a call
 * without a token is `unauthenticated`, the token field keeps the token in
 * sessionStorage only, and calls then carry it.
 *
 * Screenshots go to test-artifacts/ (git-ignored). Outside CI a missing
 * /usr/bin/chromium skips this file; under CI=true it fails.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DescMessage, DescService } from "@bufbuild/protobuf";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { defaultDocsDir } from "../../src/server/docs-files.js";
import { loadSiteFiles, SITE_SECURITY_HEADERS } from "../../src/server/static-site.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import {
  ARTIFACTS,
  chromiumAvailable,
  IN_CI,
  launchChromium,
  openWatchedPage,
  prepareBrowserTest,
  TEST_TIMEOUT_MS,
} from "../helpers/browser.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const docsBuilt = () => loadSiteFiles(defaultDocsDir()) !== undefined;

/** The section of one RPC. */
function rpc(page: Page, service: DescService, name: string): Locator {
  return page.locator(`[data-method="${service.typeName}.${name}"]`);
}

/** Types `body` into the RPC's form (or keeps what is there), sends it, and waits for its answer. */
async function send(section: Locator, body?: unknown): Promise<Locator> {
  if (body !== undefined) await section.locator("textarea").fill(typeof body === "string" ? body : JSON.stringify(body, null, 2));
  const form = section.getByTestId("try-it");
  const answers = Number(await form.getAttribute("data-answers"));
  await section.getByRole("button", { name: "Send" }).click();
  await section.locator(`[data-testid="try-it"][data-answers="${answers + 1}"]`).waitFor();
  return section.getByTestId("outcome");
}

async function responseJson(section: Locator): Promise<any> {
  const outcome = section.getByTestId("outcome");
  expect(await outcome.getAttribute("data-outcome"), (await outcome.textContent()) ?? "").toBe("response");
  return JSON.parse((await section.getByTestId("response-body").textContent()) ?? "");
}

describe.skipIf(!chromiumAvailable && !IN_CI)("API reference in chromium", { timeout: TEST_TIMEOUT_MS }, () => {
  let browser: Browser;
  let t: TestServer;

  beforeAll(async () => {
    prepareBrowserTest("scripts/build-docs.mjs", docsBuilt);
    t = await startTestServer();
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("serves /docs with the console's security headers, and runs without errors or CSP violations", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`);
    const res = await page.goto(`${t.apiUrl}/docs`);
    expect(res!.status()).toBe(200);
    const headers = res!.headers();
    for (const [name, value] of Object.entries(SITE_SECURITY_HEADERS)) expect(headers[name], name).toBe(value);
    expect(headers["content-security-policy"]).not.toMatch(/unsafe-inline|unsafe-eval/);
    await rpc(page, LeaseQueueService, "Submit").waitFor();
    // Nothing from another origin: every resource the page loaded is this server's.
    const origins = await page.evaluate(() =>
      (globalThis as any).performance.getEntriesByType("resource").map((e: { name: string }) => new URL(e.name).origin),
    );
    expect(new Set(origins)).toEqual(new Set([t.apiUrl]));
    await page.screenshot({ path: `${ARTIFACTS}docs-top.png` });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("shows every RPC of both services and every field of every message, enum value and bound", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`);
    await rpc(page, LeaseQueueService, "Submit").waitFor();
    for (const service of [LeaseQueueService, Health]) {
      for (const method of service.methods) {
        const section = rpc(page, service, method.name);
        expect(await section.count(), method.name).toBe(1);
        // A form, or for bidi Work the note saying why there is none.
        const tryable = method.methodKind === "unary" || method.methodKind === "server_streaming";
        expect(await section.getByTestId(tryable ? "try-it" : "no-form").count(), method.name).toBe(1);
      }
    }
    const messages: DescMessage[] = [];
    const collect = (desc: DescMessage) => {
      if (desc.typeName.startsWith("google.protobuf.") || messages.includes(desc) || desc.proto.options?.mapEntry) return;
      messages.push(desc);
      desc.nestedMessages.forEach(collect);
    };
    for (const service of [LeaseQueueService, Health]) service.file.messages.forEach(collect);
    const onPage = await page.evaluate(() => {
      const doc = (globalThis as any).document;
      const found: Record<string, string[]> = {};
      for (const section of doc.querySelectorAll("section[data-message]")) {
        found[section.dataset.message] = [...section.querySelectorAll("tr[data-field]")].map((tr: any) => tr.dataset.field);
      }
      return found;
    });
    for (const message of messages) expect(onPage[message.typeName], message.typeName).toEqual(message.fields.map((f) => f.jsonName));
    const jobState = page.locator('[data-enum="leasequeue.v1.JobState"] tr[data-enum-value]');
    expect(await jobState.count()).toBe(8);
    expect(await page.locator('#bounds tr[data-bound="priority"]').textContent()).toContain("-100..100");
    expect(await page.locator('#errors tr[data-error-reasons~="LEASE_EXPIRED"]').textContent()).toContain("aborted");
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("finds Submit with the filter and creates a job with its example", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`);
    await page.getByLabel("Filter RPCs, messages and enums").fill("submit");
    const nav = page.getByRole("navigation", { name: "Contents" });
    // The contents are drawn again after the input: Claim is gone then.
    await nav.getByRole("link", { name: "Claim", exact: true }).waitFor({ state: "detached" });
    await nav.getByRole("link", { name: "Submit", exact: true }).click();
    expect(await page.evaluate(() => (globalThis as any).location.hash)).toBe("#leasequeue.v1.LeaseQueueService.Submit");
    const submit = rpc(page, LeaseQueueService, "Submit");
    expect(await submit.getByTestId("role").textContent()).toBe("producer");

    await send(submit);
    const body = await responseJson(submit);
    expect(body.job).toMatchObject({
      queue: "emails",
      task: "welcome.send",
      payload: { to: "ada@example.com" },
      state: "JOB_STATE_QUEUED",
    });
    // It is a real job: the API answers for it.
    const got = await t.call("GetJob", { jobId: body.job.id });
    expect(got.status).toBe(200);
    expect(got.body.job.task).toBe("welcome.send");
    await submit.screenshot({ path: `${ARTIFACTS}docs-submit.png` });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("shows invalid_argument with the field for a bad body, and the parse error for malformed JSON", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs#leasequeue.v1.LeaseQueueService.Submit`, /^400$/);
    const submit = rpc(page, LeaseQueueService, "Submit");
    const outcome = await send(submit, { queue: "emails", task: "welcome.send", priority: 1000 });
    expect(await outcome.getAttribute("data-outcome")).toBe("error");
    expect(await submit.getByTestId("error-code").textContent()).toBe("invalid_argument");
    expect(await submit.getByTestId("error-message").textContent()).toContain("priority");
    const violation = submit.getByTestId("field-violation");
    expect(await violation.getAttribute("data-field")).toBe("priority");
    expect(await violation.textContent()).toMatch(/-100 and 100/);
    await submit.screenshot({ path: `${ARTIFACTS}docs-invalid-argument.png` });

    // "Reset example" brings back the example after an edit.
    await submit.getByRole("button", { name: "Reset example" }).click();
    expect(JSON.parse(await submit.locator("textarea").inputValue())).toMatchObject({ queue: "emails", task: "welcome.send" });

    await send(submit, '{"queue": "emails", "task": ');
    expect(await submit.getByTestId("error-code").textContent()).toBe("invalid_argument");
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("runs Submit, Claim and Complete from the page", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`);
    const submit = rpc(page, LeaseQueueService, "Submit");
    const claim = rpc(page, LeaseQueueService, "Claim");
    const complete = rpc(page, LeaseQueueService, "Complete");
    await send(submit, { queue: "docs-flow", task: "welcome.send", payload: { to: "grace@example.com" } });
    const submitted = (await responseJson(submit)).job.id as string;

    await send(claim, { queue: "docs-flow", workerId: "docs-worker-1", leaseDuration: "60s" });
    const lease = (await responseJson(claim)).leases[0];
    expect(lease.job).toMatchObject({ id: submitted, state: "JOB_STATE_RUNNING", workerId: "docs-worker-1" });
    expect(lease.leaseToken).toEqual(expect.any(String));
    // The page has filled the lease into Complete's example already ...
    expect(JSON.parse(await complete.locator("textarea").inputValue())).toMatchObject({ jobId: submitted, leaseToken: lease.leaseToken });

    // ... and a user may paste it in by hand all the same.
    await send(complete, { jobId: lease.job.id, leaseToken: lease.leaseToken, result: { sent: true } });
    expect((await responseJson(complete)).job).toMatchObject({ id: submitted, state: "JOB_STATE_COMPLETED", result: { sent: true } });
    expect((await t.call("GetJob", { jobId: submitted })).body.job.state).toBe("JOB_STATE_COMPLETED");
    await complete.screenshot({ path: `${ARTIFACTS}docs-complete.png` });

    // The same token again: the lease is gone, and the page says so with its reason.
    await send(complete);
    expect(await complete.getByTestId("error-code").textContent()).toBe("aborted");
    expect(await complete.getByTestId("error-reason").getAttribute("data-reason")).toBe("LEASE_REJECTED");
    expect(errors.filter((e) => !/status of 409/.test(e))).toEqual([]);
    await page.context().close();
  });

  it("reads a server stream (WatchEvents) as its events arrive, and stops it", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`);
    const watch = rpc(page, LeaseQueueService, "WatchEvents");
    await watch.locator("textarea").fill(JSON.stringify({ queue: "docs-stream" }));
    await watch.getByRole("button", { name: "Open stream" }).click();
    await watch.getByTestId("stream-outcome").and(page.locator('[data-open="true"]')).waitFor();
    // Subscribed once its first message, a keepalive, came (docs/api.md "WatchEvents: following events"):
    // a job submitted before that is not in a stream without afterSequence.
    await watch
      .getByTestId("stream-outcome")
      .getByText(/ · \d+ keepalives?$/)
      .waitFor();
    const submitted = await t.call("Submit", { queue: "docs-stream", task: "report.build" });
    expect(submitted.status).toBe(200);
    const first = watch.getByTestId("stream-message").first();
    await first.waitFor();
    const event = JSON.parse((await first.textContent()) ?? "").event;
    expect(event).toMatchObject({ jobId: submitted.body.job.id, kind: "EVENT_KIND_SUBMITTED", queue: "docs-stream" });
    await watch.getByRole("button", { name: "Stop" }).click();
    await watch.getByText("Stopped by you.").waitFor();
    await watch.screenshot({ path: `${ARTIFACTS}docs-watch-events.png` });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("is linked from the console's header", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/`);
    await page.getByRole("link", { name: "API reference" }).click();
    await rpc(page, LeaseQueueService, "Submit").waitFor();
    expect(new URL(page.url()).pathname).toBe("/docs");
    expect(errors).toEqual([]);
    await page.context().close();
  });
});

describe.skipIf(!chromiumAvailable && !IN_CI)("API reference in chromium, with authentication on", { timeout: TEST_TIMEOUT_MS }, () => {
  let browser: Browser;
  let t: TestServer;
  let dir: string;
  let token: string;

  beforeAll(async () => {
    prepareBrowserTest("scripts/build-docs.mjs", docsBuilt);
    dir = mkdtempSync(join(tmpdir(), "leasequeue-docs-auth-"));
    const file = writeAuthFile(dir, [{ name: "dev", roles: ["producer", "worker", "reader"] }]);
    token = file.tokens["dev"]!;
    t = await startTestServer({ "auth-file": file.path });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("says a token is needed, keeps the one given in sessionStorage only, and sends it", async () => {
    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/docs`, /^401$/);
    const sent: string[] = [];
    page.on("request", (req) => {
      if (req.url().includes("/leasequeue.v1.LeaseQueueService/")) sent.push(req.headers()["authorization"] ?? "");
    });
    const submit = rpc(page, LeaseQueueService, "Submit");
    await send(submit);
    expect(await submit.getByTestId("error-code").textContent()).toBe("unauthenticated");
    expect(await submit.getByTestId("outcome").textContent()).toMatch(/requires a bearer token/);

    await page.getByLabel("Bearer token").fill(token);
    await page.getByRole("button", { name: "Use", exact: true }).click();
    await page.locator('[data-testid="token-field"][data-token="set"]').waitFor();
    const stored = await page.evaluate(() => ({
      session: (globalThis as any).sessionStorage.getItem("leasequeue.token"),
      local: (globalThis as any).localStorage.length,
      cookie: (globalThis as any).document.cookie,
      url: (globalThis as any).location.href,
    }));
    expect(stored).toEqual({ session: token, local: 0, cookie: "", url: `${t.apiUrl}/docs` });

    await send(submit);
    const job = (await responseJson(submit)).job;
    expect((await t.call("GetJob", { jobId: job.id }, bearer(token))).status).toBe(200);
    expect(sent).toEqual(["", `Bearer ${token}`]);

    await page.getByRole("button", { name: "Forget token" }).click();
    await page.locator('[data-testid="token-field"][data-token="none"]').waitFor();
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("leasequeue.token"))).toBeNull();
    expect(errors).toEqual([]);
    await page.context().close();
  });
});
