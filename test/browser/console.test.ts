/**
 * The operations console in a real browser: Debian's chromium driven by
 * playwright-core, against a real server on a free port.
 *
 * Flows: the empty state; a job submitted through the API appears without a
 * reload (live from WatchEvents; and, with WatchEvents failing, through the
 * visible polling fallback); the job page shows the timeline and follows it,
 * and a running job's progress as it is reported;
 * a dead job is redriven with the button (after a confirmation step) and
 * becomes queued; a queued job is cancelled; a job's dependency graph shows
 * its dependencies and dependents by state, follows them live and leads to
 * their pages, a waiting job is cancelled, and more than 20 dependents lead
 * to the jobs view; a queue is paused and resumed,
 * its dead jobs redriven all at once, and it is purged only when its name
 * is typed, each showing the API's error when refused; a queue's groups
 * are listed by backlog (live, at most 10 pages read, linked to the jobs
 * view's group filter) and its group rules set with only the changed fields
 * sent; schedules are listed
 * with their next and last runs (live), paused, resumed and deleted; a queue's
 * activity is charted (its last hour, following completions live, in both
 * color schemes) and a job's attempts are drawn to scale; an unreachable server is said
 * to be one; `/` carries the security headers; the page logs no console
 * error and no CSP violation. With authentication on: the token prompt,
 * a refused token, sessionStorage only, live updates and actions with a token.
 *
 * Screenshots go to test-artifacts/ (git-ignored). With
 * LEASEQUEUE_DOCS_SCREENSHOT=1 the last test also rewrites docs/console.png.
 *
 * Outside CI a missing /usr/bin/chromium skips this file; under CI=true it
 * fails. Debian package: chromium.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { timestampDate, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { chromium, type Browser, type ConsoleMessage, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatRelativeTime } from "../../src/console/format.js";
import { ManualClock } from "../../src/testing/index.js";
import { defaultConsoleDir } from "../../src/server/console-files.js";
import { loadSiteFiles } from "../../src/server/static-site.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import {
  ARTIFACTS,
  CHROMIUM,
  chromiumAvailable as available,
  IN_CI,
  launchChromium,
  openWatchedPage,
  prepareBrowserTest,
  REPO_ROOT,
  REPORT_CSP_VIOLATIONS,
  TEST_TIMEOUT_MS,
  UI_TIMEOUT_MS,
  type WatchedPage as ConsolePage,
} from "../helpers/browser.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const consoleBuilt = () => loadSiteFiles(defaultConsoleDir()) !== undefined;

/** Marks the document; `expectSameDocument` fails if the page was reloaded since. */
async function markDocument(page: Page): Promise<void> {
  await page.evaluate(() => {
    (globalThis as { __leasequeueMark?: boolean }).__leasequeueMark = true;
  });
}
async function expectSameDocument(page: Page): Promise<void> {
  expect(await page.evaluate(() => (globalThis as { __leasequeueMark?: boolean }).__leasequeueMark)).toBe(true);
}

/** How often the console refetches while live updates are unavailable (POLL_INTERVAL_MS, src/console/live.ts). */
const POLL_INTERVAL_MS = 5_000;
/** The longest the console waits before it subscribes again: its backoff's ceiling, 30 s, plus 20% jitter (src/console/live.ts). */
const RESUBSCRIBE_MAX_MS = 36_000;

/**
 * Waits until the console is live, moving the page's clock (Playwright's,
 * installed on its context before the page loaded) past the console's next
 * subscription attempt each time it is not: the attempt happens when the test
 * says, not after a wall-clock wait for the backoff.
 */
async function untilLive(page: Page): Promise<void> {
  const live = page.locator('[data-live-mode="live"]');
  await until(
    "the console to subscribe again and be live",
    async () => {
      if ((await live.count()) > 0) return true;
      await page.clock.fastForward(RESUBSCRIBE_MAX_MS);
      return false;
    },
    { timeoutMs: UI_TIMEOUT_MS, pollMs: 100 },
  );
}

/**
 * Waits until `field` has the focus: a form focuses its field as it is put in
 * the page (or, for a confirmation, its button just after), and typing before
 * that could go to another field.
 */
async function focused(page: Page, field: Locator): Promise<void> {
  await field.and(page.locator(":focus")).waitFor();
}

/** Waits until the outcome line reads `text`; a timeout also says what it read instead. */
async function outcomeReads(outcome: Locator, text: string | RegExp): Promise<void> {
  await outcome
    .getByText(text)
    .waitFor()
    .catch(async (err: unknown) => {
      const shown = await outcome.textContent({ timeout: 1000 }).catch(() => "(no outcome line)");
      throw new Error(`${String(err)}\nthe outcome line reads: ${shown}`);
    });
}

describe.skipIf(!available && !IN_CI)("operations console in chromium", { timeout: TEST_TIMEOUT_MS }, () => {
  let browser: Browser;
  let t: TestServer;

  beforeAll(async () => {
    prepareBrowserTest("scripts/build-console.mjs", consoleBuilt);
    t = await startTestServer();
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  async function openConsole(hash = "#/"): Promise<ConsolePage> {
    return openWatchedPage(browser, `${t.apiUrl}/${hash}`);
  }

  async function waitForLive(page: Page): Promise<void> {
    await page.locator('[data-live-mode="live"]').waitFor();
  }

  async function submit(body: Record<string, unknown>): Promise<string> {
    const res = await t.call("Submit", body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.job.id as string;
  }

  async function claimAndFail(queue: string, jobId: string): Promise<void> {
    const claim = await t.call("Claim", { queue, workerId: "browser-test-worker" });
    expect(claim.status).toBe(200);
    const lease = claim.body.leases[0];
    expect(lease.job.id).toBe(jobId);
    const fail = await t.call("Fail", { jobId, leaseToken: lease.leaseToken, error: "smtp: connection refused" });
    expect(fail.status).toBe(200);
    expect(fail.body.job.state).toBe("JOB_STATE_DEAD");
  }

  it("serves / with the security headers", async () => {
    const { page, errors } = await openConsole();
    const res = await page.goto(`${t.apiUrl}/`);
    const headers = res!.headers();
    expect(res!.status()).toBe(200);
    expect(headers["content-security-policy"]).toMatch(/^default-src 'self'/);
    expect(headers["content-security-policy"]).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(headers["x-content-type-options"]).toBe("nosniff");
    expect(headers["x-frame-options"]).toBe("DENY");
    expect(headers["referrer-policy"]).toBe("no-referrer");
    await page.locator("h1", { hasText: "Queues" }).waitFor();
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("shows the empty state, then a newly submitted job without reloading, live from WatchEvents", async () => {
    const { page, errors } = await openConsole("#/jobs");
    await page.getByTestId("no-jobs").waitFor();
    expect(await page.getByTestId("no-jobs").textContent()).toContain(`curl -s ${t.apiUrl}/leasequeue.v1.LeaseQueueService/Submit`);
    await waitForLive(page);
    await markDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-empty.png` });

    const id = await submit({ queue: "emails", task: "welcome.send", payload: { to: "ada@example.com" } });
    const row = page.locator(`tr[data-job-id="${id}"]`);
    await row.waitFor();
    expect(await row.locator(".badge").textContent()).toBe("Queued");
    await expectSameDocument(page);
    // Live, not polled: the feed never left the live mode.
    expect(await page.getByTestId("live-degraded").count()).toBe(0);
    await waitForLive(page);

    // The overview follows too.
    await page.getByRole("link", { name: "Queues", exact: true }).click();
    const queued = page.locator('tr[data-queue="emails"] td[data-state="queued"]');
    await queued.waitFor();
    expect(await queued.textContent()).toBe("1");
    await submit({ queue: "emails", task: "welcome.send", payload: { to: "grace@example.com" } });
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector('tr[data-queue="emails"] td[data-state="queued"]')?.textContent === "2",
    );
    await expectSameDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-overview.png` });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("falls back to visible polling when WatchEvents fails, and still shows new jobs without reloading", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    // As an older server would answer: WatchEvents is not there.
    await context.route("**/leasequeue.v1.LeaseQueueService/WatchEvents", (route) =>
      route.fulfill({ status: 404, contentType: "application/json", body: '{"code":"unimplemented","message":"not here"}' }),
    );
    // The page's timers run on a clock the test moves: the polling and the backoff happen when the test says.
    await context.clock.install();
    const page = await context.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    await page.goto(`${t.apiUrl}/#/jobs?queue=reports`);
    const banner = page.getByTestId("live-degraded");
    await banner.waitFor();
    expect(await banner.textContent()).toMatch(/Live updates unavailable, refreshing every 5 s/);
    expect(await page.locator("[data-live-mode]").getAttribute("data-live-mode")).toBe("degraded");
    await markDocument(page);

    const id = await submit({ queue: "reports", task: "report.build" });
    // The next poll refetches the list.
    await page.clock.fastForward(POLL_INTERVAL_MS);
    await page.locator(`tr[data-job-id="${id}"]`).waitFor();
    await expectSameDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-polling.png` });

    // WatchEvents is back: the console re-subscribes (with backoff) and is live again.
    await context.unroute("**/leasequeue.v1.LeaseQueueService/WatchEvents");
    await untilLive(page);
    expect(await banner.count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  });

  it("opens a job's page and follows its timeline", async () => {
    const id = await submit({ queue: "billing", task: "invoice.generate", payload: { invoiceId: "inv_481" } });
    const { page, errors } = await openConsole(`#/jobs?queue=billing`);
    await waitForLive(page);
    await page.locator(`tr[data-job-id="${id}"] a`).click();
    await page.locator("h1", { hasText: id }).waitFor();
    expect(page.url()).toContain(`#/jobs/${id}`);
    expect(await page.getByTestId("job-payload").textContent()).toContain('"invoiceId": "inv_481"');
    const timeline = page.getByTestId("timeline");
    await timeline.locator('tr[data-kind="submitted"]').waitFor();
    await markDocument(page);

    // A worker claims it: the page follows, live.
    const claim = await t.call("Claim", { queue: "billing", workerId: "worker-7" });
    expect(claim.body.leases[0].job.id).toBe(id);
    await timeline.locator('tr[data-kind="claimed"]').waitFor();
    await page.getByTestId("job-state").getByText("Running").waitFor();
    expect(await page.locator(".facts").textContent()).toContain("held by worker-7");
    await expectSameDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-job-timeline.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("shows a running job's progress live, and the last one reported once it completes", async () => {
    const id = await submit({ queue: "renders", task: "video.render" });
    const claim = await t.call("Claim", { queue: "renders", workerId: "render-1" });
    const lease = claim.body.leases[0];
    expect(lease.job.id).toBe(id);
    const { page, errors } = await openConsole(`#/jobs/${id}`);
    await waitForLive(page);
    const progress = page.getByTestId("job-progress");
    await progress.getByText("none reported").waitFor();
    await markDocument(page);

    // The job's first progress report is stored and announced: the page follows without a reload.
    const beat = await t.call("Heartbeat", { jobId: id, leaseToken: lease.leaseToken, progress: { frames: 120, of: 480 } });
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
    await progress.getByText('{"frames":120,"of":480}').waitFor();
    await page.getByTestId("timeline").locator('tr[data-kind="progress"]').waitFor();

    // A report made less than a second later is stored on the job but not in the timeline: the next event shows it.
    await t.call("Heartbeat", { jobId: id, leaseToken: lease.leaseToken, progress: { frames: 480, of: 480 } });
    await t.call("Complete", { jobId: id, leaseToken: lease.leaseToken });
    await page.getByTestId("job-state").getByText("Completed").waitFor();
    expect(await progress.textContent()).toBe('{"frames":480,"of":480}');
    await expectSameDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-job-progress.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("redrives a dead job with the button, after a confirmation step", async () => {
    const id = await submit({ queue: "mail", task: "email.send", maxAttempts: 1, payload: { to: "x@example.com" } });
    await claimAndFail("mail", id);

    const { page, errors } = await openConsole("#/jobs");
    await waitForLive(page);
    // Find it with the filters.
    await page.getByLabel("Queue").selectOption("mail");
    await page.getByLabel("State").selectOption("dead");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/#\/jobs\?queue=mail&state=dead$/);
    await page.getByText("Jobs matching the filter").waitFor();
    await page.locator(`tr[data-job-id="${id}"]`).waitFor();
    // Under the filter caption there are never the unfiltered rows.
    expect(await page.locator("tr[data-job-id]").count()).toBe(1);
    await page.locator(`tr[data-job-id="${id}"] a`).click();
    await page.getByTestId("job-state").getByText("Dead").waitFor();
    expect(await page.locator("pre.error-text").textContent()).toBe("smtp: connection refused");

    await page.getByRole("button", { name: "Redrive…" }).click();
    const confirm = page.getByTestId("confirm");
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain("Redrive this job?");
    // Nothing happened yet.
    expect((await t.client.getJob({ jobId: id })).job?.state).toBe(5 /* DEAD */);
    await page.screenshot({ path: `${ARTIFACTS}console-redrive-confirm.png`, fullPage: true });

    await confirm.getByRole("button", { name: "Yes, redrive" }).click();
    const outcome = page.getByTestId("action-outcome");
    await outcome.waitFor();
    expect(await outcome.textContent()).toBe("Redriven: the job is now Queued.");
    await page.getByTestId("job-state").getByText("Queued").waitFor();
    await page.getByTestId("timeline").locator('tr[data-kind="redriven"]').waitFor();
    const after = await t.call("GetJob", { jobId: id });
    expect(after.body.job.state).toBe("JOB_STATE_QUEUED");
    await page.screenshot({ path: `${ARTIFACTS}console-redriven.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("pages through a queue with page tokens", async () => {
    const batch = await t.call("SubmitBatch", {
      jobs: Array.from({ length: 30 }, (_, i) => ({ queue: "bulk", task: "thumbnail.render", payload: { n: i } })),
    });
    expect(batch.status).toBe(200);
    // ListJobs: newest first, by id (UUIDv7).
    const ids: string[] = batch.body.results
      .map((r: { job: { id: string } }) => r.job.id)
      .sort()
      .reverse();
    const { page, errors } = await openConsole("#/jobs?queue=bulk");
    const rows = page.locator("tr[data-job-id]");
    await page.locator(`tr[data-job-id="${ids[0]}"]`).waitFor();
    expect(await rows.count()).toBe(25);
    await page.getByRole("link", { name: "Next page" }).click();
    await page.locator(`tr[data-job-id="${ids[25]}"]`).waitFor();
    expect(await rows.count()).toBe(5);
    expect(await page.getByRole("link", { name: "Next page" }).count()).toBe(0);
    await page.getByRole("link", { name: "First page" }).click();
    await page.locator(`tr[data-job-id="${ids[0]}"]`).waitFor();
    expect(await rows.count()).toBe(25);
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("cancels a queued job with a reason, and can back out of the confirmation", async () => {
    const id = await submit({ queue: "mail", task: "email.digest" });
    const { page, errors } = await openConsole(`#/jobs/${id}`);
    await page.getByTestId("job-state").getByText("Queued").waitFor();

    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByRole("button", { name: "No, keep it" }).click();
    await page.getByRole("button", { name: "Cancel job…" }).waitFor();
    expect((await t.call("GetJob", { jobId: id })).body.job.state).toBe("JOB_STATE_QUEUED");

    await page.getByRole("button", { name: "Cancel job…" }).click();
    // The confirmation focuses its button just after it shows: typed before that, the reason could be lost.
    await focused(page, page.getByRole("button", { name: "Yes, cancel the job" }));
    await page.getByLabel("Reason (optional)").fill("duplicate digest");
    await page.getByRole("button", { name: "Yes, cancel the job" }).click();
    await page.getByTestId("action-outcome").getByText("Cancelled: the job is now Cancelled.").waitFor();
    await page.getByTestId("timeline").locator('tr[data-kind="cancelled"]', { hasText: "duplicate digest" }).waitFor();
    expect((await t.call("GetJob", { jobId: id })).body.job.state).toBe("JOB_STATE_CANCELLED");
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("cancels a running job, telling the operator its worker will be stopped", async () => {
    const id = await submit({ queue: "render", task: "page.render" });
    const claimed = await t.call("Claim", { queue: "render", workerId: "render-1" });
    expect(claimed.body.leases[0].job.id).toBe(id);
    const { page, errors } = await openConsole(`#/jobs/${id}`);
    await page.getByTestId("job-state").getByText("Running").waitFor();
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByTestId("confirm").getByText("Its worker is told to stop at once").waitFor();
    await focused(page, page.getByRole("button", { name: "Yes, cancel the job" }));
    await page.getByRole("button", { name: "Yes, cancel the job" }).click();
    await page.getByTestId("action-outcome").getByText("Cancelled: the job is now Cancelled.").waitFor();
    expect((await t.call("GetJob", { jobId: id })).body.job.state).toBe("JOB_STATE_CANCELLED");
    const late = await t.call("Complete", { jobId: id, leaseToken: claimed.body.leases[0].leaseToken });
    expect(late.body.message).toContain("was cancelled while running");
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("draws a job's dependencies and dependents, live, each node leading to its job; a waiting job is cancelled", async () => {
    // A completes; then C waits for A and B, and D for C.
    const a = await submit({ queue: "flow", task: "extract.orders" });
    const claimedA = await t.call("Claim", { queue: "flow", workerId: "flow-1" });
    expect(claimedA.body.leases[0].job.id).toBe(a);
    await t.call("Complete", { jobId: a, leaseToken: claimedA.body.leases[0].leaseToken });
    const b = await submit({ queue: "flow-load", task: "extract.customers" });
    const c = await submit({ queue: "flow", task: "merge.report", dependsOn: [a, b] });
    const d = await submit({ queue: "flow", task: "publish.report", dependsOn: [c] });
    expect((await t.call("GetJob", { jobId: c })).body.job.state).toBe("JOB_STATE_WAITING");

    // The queues page counts them as waiting, and lists them by that state.
    const { page, errors } = await openConsole("#/");
    const waiting = page.locator('tr[data-queue="flow"] td[data-state="waiting"]');
    await waiting.getByText("2").waitFor();
    await waiting.getByRole("link").click();
    await page.waitForURL(/#\/jobs\?queue=flow&state=waiting$/);
    await page.locator(`tr[data-job-id="${d}"]`).getByText("Waiting").waitFor();
    expect(await page.locator("tr[data-job-id]").count()).toBe(2);
    await page.locator(`tr[data-job-id="${c}"] a`).click();
    await page.locator("h1", { hasText: c }).waitFor();
    await waitForLive(page);
    const graph = page.getByTestId("dependency-graph");
    const node = (id: string, side: string, state: string) =>
      graph.locator(`[data-job-id="${id}"][data-side="${side}"][data-state="${state}"]`);
    await node(a, "dependency", "completed").waitFor();
    await node(b, "dependency", "queued").waitFor();
    await node(d, "dependent", "waiting").waitFor();
    await node(c, "center", "waiting").waitFor();
    expect(await graph.locator("a.node").count()).toBe(3);
    expect(await node(b, "dependency", "queued").getAttribute("href")).toBe(`#/jobs/${b}`);
    expect(await node(a, "dependency", "completed").textContent()).toContain("extract.orders");
    expect(await page.getByTestId("dependency-counts").textContent()).toBe(
      "2 dependencies: 1 completed, 0 failed (dead or cancelled), 1 pending.",
    );
    expect(await page.getByTestId("waiting-on").textContent()).toBe("Waiting for 1 of 2 dependencies to complete.");
    await page.getByTestId("job-state").getByText("Waiting").waitFor();
    await page.getByTestId("dependencies").screenshot({ path: `${ARTIFACTS}console-dependency-graph.png` });

    // A waiting job can be cancelled; the confirmation says what happens to the job waiting for it. Kept here.
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByTestId("confirm").getByText("The jobs waiting for it are cancelled too").waitFor();
    await page.getByRole("button", { name: "No, keep it" }).click();

    // B completes: its node and C follow live, and C is released.
    await markDocument(page);
    const claimedB = await t.call("Claim", { queue: "flow-load", workerId: "flow-2" });
    expect(claimedB.body.leases[0].job.id).toBe(b);
    await t.call("Complete", { jobId: b, leaseToken: claimedB.body.leases[0].leaseToken });
    await node(b, "dependency", "completed").waitFor();
    await page.getByTestId("job-state").getByText("Queued").waitFor();
    await page
      .getByTestId("dependency-counts")
      .getByText("2 dependencies: 2 completed, 0 failed (dead or cancelled), 0 pending.")
      .waitFor();
    expect(await page.getByTestId("waiting-on").count()).toBe(0);
    await page.getByTestId("timeline").locator('tr[data-kind="dependencies-met"]').waitFor();
    await expectSameDocument(page);

    // D's node leads to D's page, where C is its dependency; D is still waiting, and cancelled there.
    await node(d, "dependent", "waiting").click();
    await page.locator("h1", { hasText: d }).waitFor();
    expect(page.url()).toContain(`#/jobs/${d}`);
    await node(c, "dependency", "queued").waitFor();
    await node(d, "center", "waiting").waitFor();
    expect(await page.getByTestId("dependencies").textContent()).toContain("No job depends on it.");
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await focused(page, page.getByRole("button", { name: "Yes, cancel the job" }));
    await page.getByRole("button", { name: "Yes, cancel the job" }).click();
    await page.getByTestId("action-outcome").getByText("Cancelled: the job is now Cancelled.").waitFor();
    await node(d, "center", "cancelled").waitFor();
    expect((await t.call("GetJob", { jobId: d })).body.job.state).toBe("JOB_STATE_CANCELLED");
    await expectSameDocument(page);

    // Past 20 dependents the graph links to the rest in the jobs view.
    const fan = await t.call("SubmitBatch", {
      jobs: Array.from({ length: 22 }, (_, i) => ({ queue: "flow-fan", task: "notify", payload: { n: i }, dependsOn: [a] })),
    });
    expect(fan.status, JSON.stringify(fan.body)).toBe(200);
    await node(c, "dependency", "queued").click();
    await page.locator("h1", { hasText: c }).waitFor();
    await node(a, "dependency", "completed").click();
    await page.locator("h1", { hasText: a }).waitFor();
    await graph.locator('[data-side="dependent"]').nth(19).waitFor();
    expect(await graph.locator('[data-side="dependent"]').count()).toBe(20);
    await page.getByTestId("dependencies").screenshot({ path: `${ARTIFACTS}console-dependency-graph-more.png` });
    await page.getByTestId("more-dependents").click();
    await page.waitForURL(new RegExp(`#/jobs\\?dependentsOf=${a}$`));
    await page.getByTestId("related-filter").getByText(`Only the jobs that depend on job ${a}.`).waitFor();
    await page.locator(`tr[data-job-id="${c}"]`).waitFor();
    expect(await page.locator("tr[data-job-id]").count()).toBe(23);
    expect(errors).toEqual([]);
    await page.context().close();
  });

  /** The console errors Chromium logs for API refusals a test provoked on purpose (status `status`). */
  function withoutRefusals(errors: string[], status: number): string[] {
    return errors.filter((e) => !e.includes(`the server responded with a status of ${status}`));
  }

  /** Answers the next call of `method` as the API would refuse it (e.g. without the operator role). */
  async function refuseOnce(page: Page, method: string): Promise<void> {
    await page.route(
      `**/leasequeue.v1.LeaseQueueService/${method}`,
      (route) =>
        route.fulfill({
          status: 403,
          contentType: "application/json",
          body: '{"code":"permission_denied","message":"this token lacks the operator role"}',
        }),
      { times: 1 },
    );
  }

  it("pauses and resumes a queue from the queues page, and shows the API's error", async () => {
    const id = await submit({ queue: "ctl-pause", task: "report.build" });
    const { page, errors } = await openConsole("#/");
    const row = page.locator('tr[data-queue="ctl-pause"]');
    await row.and(page.locator('[data-paused="false"]')).waitFor();

    await page.getByRole("button", { name: "Pause queue ctl-pause" }).click();
    const outcome = page.getByTestId("queue-outcome");
    await outcome.getByText("Paused ctl-pause: it keeps accepting jobs but hands out none until resumed.").waitFor();
    await row.and(page.locator('[data-paused="true"]')).waitFor();
    expect(await row.locator(".badge.paused").textContent()).toBe("Paused");
    // The server really is paused: nothing is leased.
    expect((await t.call("Claim", { queue: "ctl-pause", workerId: "browser-test-worker" })).body).toEqual({});
    await page.screenshot({ path: `${ARTIFACTS}console-paused.png` });

    await refuseOnce(page, "ResumeQueue");
    await page.getByRole("button", { name: "Resume queue ctl-pause" }).click();
    await outcome.getByText("Resume failed: permission_denied: this token lacks the operator role").waitFor();
    expect(await row.getAttribute("data-paused")).toBe("true");

    await page.getByRole("button", { name: "Resume queue ctl-pause" }).click();
    await outcome.getByText("Resumed ctl-pause: workers get its jobs again.").waitFor();
    await row.and(page.locator('[data-paused="false"]')).waitFor();
    expect((await t.call("Claim", { queue: "ctl-pause", workerId: "browser-test-worker" })).body.leases[0].job.id).toBe(id);
    expect(withoutRefusals(errors, 403)).toEqual([]);
    await page.context().close();
  });

  it("sets a queue's limits from the queues page, shows them, and shows the API's refusal of a bad value", async () => {
    await submit({ queue: "ctl-limits", task: "report.build" });
    await submit({ queue: "ctl-limits", task: "report.build" });
    const { page, errors } = await openConsole("#/");
    const row = page.locator('tr[data-queue="ctl-limits"]');
    await row.waitFor();

    const form = page.getByTestId("limits-form");
    const openLimits = async () => {
      await page.getByRole("button", { name: "Limits of queue ctl-limits" }).click();
      await focused(page, form.getByLabel("Most jobs running at once"));
    };
    await openLimits();
    await form.getByLabel("Most jobs running at once").fill("1");
    await form.getByLabel("Most leases per period").fill("30");
    await form.getByLabel("Period (seconds)").fill("60");
    await form.getByRole("button", { name: "Set limits of ctl-limits" }).click();
    const outcome = page.getByTestId("queue-outcome");
    await outcome.getByText("Limits of ctl-limits: at most 1 running, 30 leases per 1 min.").waitFor();
    await row.getByTestId("queue-limits").getByText("at most 1 running, 30 leases per 1 min").waitFor();
    // The server enforces them: two eligible jobs, one lease.
    const claimed = await t.call("Claim", { queue: "ctl-limits", workerId: "browser-test-worker", maxJobs: 2 });
    expect(claimed.body.leases).toHaveLength(1);

    await openLimits();
    await form.getByLabel("Period (seconds)").fill("0.5");
    await form.getByRole("button", { name: "Set limits of ctl-limits" }).click();
    await outcomeReads(outcome, /^Limits failed: invalid_argument: config\.rate_period: /);
    // What the wire cannot carry is refused before it is sent, in the same words.
    await form.getByLabel("Most jobs running at once").fill("1.5");
    await form.getByRole("button", { name: "Set limits of ctl-limits" }).click();
    await outcome.getByText('Limits failed: invalid_argument: most jobs running must be a whole number, got "1.5"').waitFor();

    await form.getByLabel("Most jobs running at once").fill("0");
    await form.getByLabel("Most leases per period").fill("0");
    await form.getByLabel("Period (seconds)").fill("1");
    await form.getByRole("button", { name: "Set limits of ctl-limits" }).click();
    await outcome.getByText("Limits of ctl-limits: no limits.").waitFor();
    await row.getByTestId("queue-limits").waitFor({ state: "detached" });
    expect(withoutRefusals(errors, 400)).toEqual([]);
    await page.context().close();
  });

  it("lists a queue's groups, largest backlog first, live, each linked to its jobs", async () => {
    const queue = "grp-tenants";
    const submitTo = (group: string) => submit({ queue, task: "report.build", ...(group === "" ? {} : { groupKey: group }) });
    const claimOne = async (id: string) => {
      const claim = await t.call("Claim", { queue, workerId: "browser-test-worker" });
      expect(claim.body.leases[0].job.id).toBe(id);
      return claim.body.leases[0];
    };
    // tenant-d: one job in retry, its next attempt an hour ahead.
    const retrying = await submitTo("tenant-d");
    const lease = await claimOne(retrying);
    const failed = await t.call("Fail", { jobId: retrying, leaseToken: lease.leaseToken, error: "upstream 503", retryDelay: "3600s" });
    expect(failed.body.job.state).toBe("JOB_STATE_RETRY");
    // tenant-e: one running, nothing waiting; tenant-b: one running, one queued; tenant-a 3 queued, tenant-c 5.
    await claimOne(await submitTo("tenant-e"));
    await claimOne(await submitTo("tenant-b"));
    await submitTo("tenant-b");
    for (let i = 0; i < 3; i++) await submitTo("tenant-a");
    const tenantC: string[] = [];
    for (let i = 0; i < 5; i++) tenantC.push(await submitTo("tenant-c"));
    // Jobs without a group are not listed.
    const ungrouped = await submitTo("");
    const scheduleTime = async (id: string) =>
      fromJson(TimestampSchema, (await t.call("GetJob", { jobId: id })).body.job.scheduleTime as string);
    const oldestC = await scheduleTime(tenantC[0]);
    const retryAt = await scheduleTime(retrying);

    const { page, errors } = await openConsole("#/");
    await waitForLive(page);
    // The page reads relative times against a clock fixed 42.5 s after tenant-c's oldest job was
    // submitted: what it shows does not depend on how long the test took to get here.
    const pageNow = timestampDate(oldestC).getTime() + 42_500;
    await page.clock.setFixedTime(pageNow);
    await page.getByRole("link", { name: `Groups of queue ${queue}` }).click();
    await page.waitForURL(/#\/queues\/grp-tenants\/groups$/);
    const table = page.getByTestId("groups-table");
    await table.waitFor();
    await markDocument(page);
    const order = () => table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-group")));
    const counts = (group: string) => table.locator(`tr[data-group="${group}"] td[data-state]`).allTextContents();
    const oldest = (group: string) => table.locator(`tr[data-group="${group}"] td[data-field="oldest-pending"]`);
    // By backlog (queued + retry), then running: tenant-b and tenant-d both wait on one job, tenant-b also runs one.
    expect(await order()).toEqual(["tenant-c", "tenant-a", "tenant-b", "tenant-d", "tenant-e"]);
    expect(await table.locator("caption").textContent()).toMatch(/^5 groups with unfinished jobs/);
    expect(await counts("tenant-c")).toEqual(["5", "0", "0"]);
    expect(await counts("tenant-b")).toEqual(["1", "1", "0"]);
    expect(await counts("tenant-d")).toEqual(["0", "0", "1"]);
    expect(await counts("tenant-e")).toEqual(["0", "1", "0"]);
    // Oldest pending: the earliest schedule_time of the group's queued and retry jobs, relative to now.
    expect(await oldest("tenant-c").textContent()).toBe("42 s");
    // tenant-d's retry is an hour after its failure, a little less after the page's now.
    expect(await oldest("tenant-d").textContent()).toMatch(/^in \d+ min$/);
    expect(await oldest("tenant-d").textContent()).toBe(formatRelativeTime(retryAt, pageNow));
    expect(await oldest("tenant-d").locator("time").getAttribute("datetime")).toBe(timestampDate(retryAt).toISOString());
    expect(await oldest("tenant-e").textContent()).toBe("—");
    await page.screenshot({ path: `${ARTIFACTS}console-groups.png` });

    // Live: tenant-a's backlog grows past tenant-c's and it moves to the top without a reload
    // (at 5 it ties with tenant-c and already leads by key: wait for all 6).
    for (let i = 0; i < 3; i++) await submitTo("tenant-a");
    await page.waitForFunction(() => {
      const top = (globalThis as any).document.querySelector('[data-testid="groups-table"] tbody tr');
      return top?.getAttribute("data-group") === "tenant-a" && top.querySelector("td[data-state]")?.textContent === "6";
    });
    expect(await order()).toEqual(["tenant-a", "tenant-c", "tenant-b", "tenant-d", "tenant-e"]);
    expect(await counts("tenant-a")).toEqual(["6", "0", "0"]);
    await expectSameDocument(page);

    // A group links to its jobs: the jobs view filtered by queue and group, the filter in the URL and the form.
    await table.getByRole("link", { name: "tenant-a", exact: true }).click();
    await page.waitForURL(/#\/jobs\?queue=grp-tenants&group=tenant-a$/);
    await page.getByText("Jobs matching the filter").waitFor();
    const jobRows = page.locator("tr[data-job-id]");
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("tr[data-job-id]").length === 6);
    expect(new Set(await jobRows.locator('td[data-field="group"]').allTextContents())).toEqual(new Set(["tenant-a"]));
    expect(await page.getByLabel("Group", { exact: true }).inputValue()).toBe("tenant-a");

    // A job's page shows its group, linked to the same filter.
    await jobRows.first().locator("a").first().click();
    const group = page.getByTestId("job-group");
    await group.getByText("tenant-a").waitFor();
    await group.getByRole("link").click();
    await page.waitForURL(/#\/jobs\?queue=grp-tenants&group=tenant-a$/);

    // The group filter typed in the form; a job without a group shows a dash in the queue's list.
    await page.getByLabel("Group", { exact: true }).fill("tenant-b");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/#\/jobs\?queue=grp-tenants&group=tenant-b$/);
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll("tr[data-job-id]").length === 2);
    await page.getByLabel("Group", { exact: true }).fill("");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/#\/jobs\?queue=grp-tenants$/);
    expect(await page.locator(`tr[data-job-id="${ungrouped}"] td[data-field="group"]`).textContent()).toBe("—");

    // A queue whose jobs have no group has no groups to list.
    await submit({ queue: "grp-none", task: "report.build" });
    await page.goto(`${t.apiUrl}/#/queues/grp-none/groups`);
    await page.getByTestId("no-groups").waitFor();
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("reads at most 10 pages of 1000 groups, and says when a queue has more", async () => {
    const { page, errors } = await openConsole("#/");
    const asked: Array<Record<string, unknown>> = [];
    // A queue with more groups than the console reads: every page names a next one.
    await page.route("**/leasequeue.v1.LeaseQueueService/ListGroups", (route) => {
      asked.push(route.request().postDataJSON());
      const n = asked.length;
      return route.fulfill({
        status: 200,
        contentType: "application/json",
        body: JSON.stringify({ groups: [{ groupKey: `g${String(n).padStart(2, "0")}`, queued: String(n) }], nextPageToken: `after-g${n}` }),
      });
    });
    await page.goto(`${t.apiUrl}/#/queues/grp-many/groups`);
    await page.getByTestId("groups-capped").waitFor();
    expect(await page.getByTestId("groups-capped").textContent()).toMatch(/^Showing the first 10 groups by group key/);
    expect(asked.slice(0, 10)).toEqual([
      { queue: "grp-many", pageSize: 1000 },
      ...Array.from({ length: 9 }, (_, i) => ({ queue: "grp-many", pageSize: 1000, pageToken: `after-g${i + 1}` })),
    ]);
    const order = await page
      .getByTestId("groups-table")
      .locator("tbody tr")
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-group")));
    expect(order).toEqual(["g10", "g09", "g08", "g07", "g06", "g05", "g04", "g03", "g02", "g01"]);
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("sets a queue's group rules with the Limits form, sending only the fields changed", async () => {
    const queue = "grp-limits";
    for (let i = 0; i < 3; i++) await submit({ queue, task: "report.build", groupKey: "tenant-a" });
    const { page, errors } = await openConsole("#/");
    const row = page.locator(`tr[data-queue="${queue}"]`);
    await row.waitFor();
    const masks: string[] = [];
    page.on("request", (req) => {
      if (req.url().endsWith("/leasequeue.v1.LeaseQueueService/UpdateQueue")) masks.push(req.postDataJSON().updateMask ?? "");
    });
    const form = page.getByTestId("limits-form");
    const outcome = page.getByTestId("queue-outcome");
    const open = async () => {
      await page.getByRole("button", { name: `Limits of queue ${queue}` }).click();
      await focused(page, form.getByLabel("Most jobs running at once"));
    };
    const setLimits = () => form.getByRole("button", { name: `Set limits of ${queue}` }).click();

    await open();
    await form.getByLabel("Most jobs of one group running at once").fill("2");
    await form.getByLabel(/^Fair:/).check();
    await setLimits();
    await outcome.getByText(`Limits of ${queue}: at most 2 running per group, fair turns.`).waitFor();
    expect(masks).toEqual(["groupMaxRunning,fair"]);
    await row.getByTestId("queue-limits").getByText("at most 2 running per group, fair turns").waitFor();
    // The server enforces it: three eligible jobs of one group, two leases.
    expect((await t.call("Claim", { queue, workerId: "browser-test-worker", maxJobs: 3 })).body.leases).toHaveLength(2);

    // The form opens with the current values; a change made meanwhile elsewhere to another field stays.
    await open();
    expect(await form.getByLabel("Most jobs of one group running at once").inputValue()).toBe("2");
    expect(await form.getByLabel(/^Fair:/).isChecked()).toBe(true);
    expect(await form.getByLabel(/^Ordered:/).isChecked()).toBe(false);
    const meanwhile = await t.call("UpdateQueue", { queue, config: { maxRunning: 4 }, updateMask: "maxRunning" });
    expect(meanwhile.status, JSON.stringify(meanwhile.body)).toBe(200);
    await form.getByLabel(/^Ordered:/).check();
    await setLimits();
    const all = "at most 4 running, at most 2 running per group, fair turns, ordered groups";
    await outcome.getByText(`Limits of ${queue}: ${all}.`).waitFor();
    expect(masks).toEqual(["groupMaxRunning,fair", "ordered"]);
    await row.getByTestId("queue-limits").getByText(all).waitFor();

    // Nothing changed: nothing is sent (an empty mask would replace every field).
    await open();
    await setLimits();
    await outcome.getByText(`Limits of ${queue} unchanged: ${all}.`).waitFor();
    expect(masks).toHaveLength(2);

    await open();
    await form.getByLabel("Most leases of one group per period").fill("1000001");
    await setLimits();
    await outcomeReads(outcome, /^Limits failed: invalid_argument: .*group_rate_limit/);
    await form.getByLabel("Most leases of one group per period").fill("0");
    await form.getByLabel("Most jobs running at once").fill("0");
    await form.getByLabel("Most jobs of one group running at once").fill("0");
    await form.getByLabel(/^Fair:/).uncheck();
    await form.getByLabel(/^Ordered:/).uncheck();
    await setLimits();
    await outcome.getByText(`Limits of ${queue}: no limits.`).waitFor();
    expect(masks.slice(2)).toEqual(["groupRateLimit", "maxRunning,groupMaxRunning,fair,ordered"]);
    await row.getByTestId("queue-limits").waitFor({ state: "detached" });
    expect(withoutRefusals(errors, 400)).toEqual([]);
    await page.context().close();
  });

  it("redrives all dead jobs of a queue from its dead jobs view, after a confirmation step", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await submit({ queue: "ctl-dead", task: "email.send", maxAttempts: 1 });
      await claimAndFail("ctl-dead", id);
      ids.push(id);
    }
    const { page, errors } = await openConsole("#/jobs?queue=ctl-dead&state=dead");
    await waitForLive(page);
    for (const id of ids) await page.locator(`tr[data-job-id="${id}"]`).waitFor();

    await refuseOnce(page, "RedriveAll");
    await page.getByRole("button", { name: "Redrive all dead jobs…" }).click();
    await page.getByTestId("redrive-all-form").getByRole("button", { name: "Yes, redrive all" }).click();
    const outcome = page.getByTestId("queue-outcome");
    await outcome.getByText("Redrive all failed: permission_denied: this token lacks the operator role").waitFor();

    await page.getByRole("button", { name: "Redrive all dead jobs…" }).click();
    const confirm = page.getByTestId("redrive-all-form");
    expect(await confirm.textContent()).toContain("Redrive every dead job of queue ctl-dead?");
    for (const id of ids) expect((await t.call("GetJob", { jobId: id })).body.job.state).toBe("JOB_STATE_DEAD");
    await page.screenshot({ path: `${ARTIFACTS}console-redrive-all-confirm.png` });
    await confirm.getByRole("button", { name: "Yes, redrive all" }).click();
    await outcome.getByText("Redriven: 3 jobs of ctl-dead back to Queued.").waitFor();
    await page.getByTestId("no-matching-jobs").waitFor();
    for (const id of ids) expect((await t.call("GetJob", { jobId: id })).body.job.state).toBe("JOB_STATE_QUEUED");
    expect(withoutRefusals(errors, 403)).toEqual([]);
    await page.context().close();
  });

  it("purges a queue only when its name is typed, showing the API's refusal of a wrong one", async () => {
    const batch = await t.call("SubmitBatch", {
      jobs: Array.from({ length: 4 }, (_, i) => ({ queue: "ctl-purge", task: "t", payload: { i } })),
    });
    expect(batch.status).toBe(200);
    const { page, errors } = await openConsole("#/");
    const row = page.locator('tr[data-queue="ctl-purge"]');
    await row.waitFor();

    await page.getByRole("button", { name: "Purge queue ctl-purge" }).click();
    const form = page.getByTestId("purge-form");
    await page.getByRole("button", { name: "No, keep the jobs" }).click();
    await form.waitFor({ state: "detached" });

    await page.getByRole("button", { name: "Purge queue ctl-purge" }).click();
    await focused(page, page.getByLabel("Type the queue name to confirm"));
    await page.getByLabel("Type the queue name to confirm").fill("ctl-purg");
    await form.getByRole("button", { name: "Purge ctl-purge" }).click();
    const outcome = page.getByTestId("queue-outcome");
    await outcome
      .getByText('Purge failed: failed_precondition: confirm: must equal the queue name "ctl-purge"', { exact: false })
      .waitFor();
    expect(await row.locator('td[data-state="queued"]').textContent()).toBe("4");
    expect((await t.call("GetStats", {})).body.queues.find((q: any) => q.queue === "ctl-purge").queued).toBe("4");
    await page.screenshot({ path: `${ARTIFACTS}console-purge-refused.png` });

    await page.getByLabel("Type the queue name to confirm").fill("ctl-purge");
    await form.getByRole("button", { name: "Purge ctl-purge" }).click();
    await outcome.getByText("Purged ctl-purge: 4 jobs cancelled.").waitFor();
    await form.waitFor({ state: "detached" });
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector('tr[data-queue="ctl-purge"] td[data-state="cancelled"]')?.textContent === "4",
    );
    const stats = (await t.call("GetStats", {})).body.queues.find((q: any) => q.queue === "ctl-purge");
    expect(stats).toMatchObject({ cancelled: "4" });
    expect(stats.queued).toBeUndefined();
    expect(withoutRefusals(errors, 400)).toEqual([]);
    await page.context().close();
  });

  it("lists schedules with their next and last runs, pauses and resumes one, and deletes one after a confirmation step", async () => {
    const create = async (schedule: Record<string, unknown>) => {
      const res = await t.call("CreateSchedule", { schedule });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.schedule;
    };
    const nightly = await create({
      name: "ui-nightly",
      cron: "0 3 * * *",
      timezone: "Europe/Berlin",
      template: { queue: "ui-reports", task: "report.build" },
    });
    await create({ name: "ui-every-second", interval: "1s", template: { queue: "ui-pings", task: "ping" } });
    await create({ name: "ui-gone", interval: "3600s", template: { task: "t" } });
    const { page, errors } = await openConsole("#/schedules");
    await waitForLive(page);
    const row = page.locator('tr[data-schedule="ui-nightly"]');
    await row.and(page.locator('[data-paused="false"]')).waitFor();
    expect(await row.textContent()).toContain("cron 0 3 * * * (Europe/Berlin)");
    expect(await row.textContent()).toContain("ui-reports / report.build");
    expect(await row.locator('[data-field="next-run"] time').getAttribute("datetime")).toBe(
      new Date(Date.parse(nightly.nextRunTime)).toISOString(),
    );
    // A run is announced live (its SCHEDULED event): the last run appears without a reload.
    const every = page.locator('tr[data-schedule="ui-every-second"]');
    expect(await every.textContent()).toContain("every 1 s");
    await every.locator('[data-field="last-run"] time').waitFor();
    await page.screenshot({ path: `${ARTIFACTS}console-schedules.png` });

    const outcome = page.getByTestId("queue-outcome");
    await page.getByRole("button", { name: "Pause schedule ui-nightly" }).click();
    await outcome.getByText("Paused ui-nightly: it submits nothing until resumed.").waitFor();
    await row.and(page.locator('[data-paused="true"]')).waitFor();
    expect(await row.locator(".badge.paused").textContent()).toBe("Paused");
    expect(await row.locator('[data-field="next-run"]').textContent()).toBe("paused");
    const listed = async () => ((await t.call("ListSchedules", {})).body.schedules ?? []) as Array<Record<string, any>>;
    expect((await listed()).find((x) => x.name === "ui-nightly")).toMatchObject({ paused: true, template: nightly.template });

    await refuseOnce(page, "CreateSchedule");
    await page.getByRole("button", { name: "Resume schedule ui-nightly" }).click();
    await outcome.getByText("Resume failed: permission_denied: this token lacks the operator role").waitFor();
    expect(await row.getAttribute("data-paused")).toBe("true");
    await page.getByRole("button", { name: "Resume schedule ui-nightly" }).click();
    await outcome.getByText(/^Resumed ui-nightly: next run \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\.$/).waitFor();
    await row.and(page.locator('[data-paused="false"]')).waitFor();

    await page.getByRole("button", { name: "Delete schedule ui-every-second" }).click();
    const confirm = page.getByTestId("delete-schedule-form");
    expect(await confirm.textContent()).toContain("Delete schedule ui-every-second?");
    await confirm.getByRole("button", { name: "No, keep it" }).click();
    await confirm.waitFor({ state: "detached" });
    expect((await listed()).map((x) => x.name)).toContain("ui-every-second");
    await page.getByRole("button", { name: "Delete schedule ui-every-second" }).click();
    await page.getByTestId("delete-schedule-form").getByRole("button", { name: "Yes, delete ui-every-second" }).click();
    await outcome.getByText("Deleted schedule ui-every-second. The jobs it submitted stay.").waitFor();
    await every.waitFor({ state: "detached" });
    expect((await listed()).map((x) => x.name)).toEqual(["ui-gone", "ui-nightly"]);
    expect((await t.call("ListJobs", { queue: "ui-pings" })).body.jobs.length).toBeGreaterThan(0);
    // A schedule that another operator deleted meanwhile: the API's refusal is shown.
    await t.call("DeleteSchedule", { name: "ui-gone" });
    await page.getByRole("button", { name: "Delete schedule ui-gone" }).click();
    await page.getByTestId("delete-schedule-form").getByRole("button", { name: "Yes, delete ui-gone" }).click();
    await outcome.getByText('Delete failed: not_found: schedule "ui-gone" does not exist').waitFor();
    await t.call("DeleteSchedule", { name: "ui-nightly" });
    expect(withoutRefusals(withoutRefusals(errors, 403), 404)).toEqual([]);
    await page.context().close();
  });

  it("says so when the server is unreachable", async () => {
    const context = await browser.newContext();
    await context.route("**/leasequeue.v1.LeaseQueueService/**", (route) => route.abort("connectionrefused"));
    const page = await context.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(`${t.apiUrl}/#/`);
    const notice = page.getByTestId("unreachable");
    await notice.waitFor();
    expect(await notice.textContent()).toContain(`cannot reach the LeaseQueue server at ${t.apiUrl}`);
    await page.getByTestId("live-degraded").waitFor();
    await page.screenshot({ path: `${ARTIFACTS}console-unreachable.png` });
    await context.close();
  });
});

/**
 * A queue's activity charts and a job's attempts, against a server on a
 * manual clock (set to the minute an hour ago, then moved by the test), so
 * the minutes, the counts and the bands' lengths are exact and no minute
 * turns over while a chart is watched.
 */
describe.skipIf(!available && !IN_CI)("queue activity and attempts in chromium", { timeout: TEST_TIMEOUT_MS }, () => {
  const MINUTE = 60_000;
  let browser: Browser;
  let t: TestServer;
  let clock: ManualClock;

  beforeAll(async () => {
    prepareBrowserTest("scripts/build-console.mjs", consoleBuilt);
    clock = new ManualClock(Math.floor(Date.now() / MINUTE) * MINUTE - 60 * MINUTE);
    t = await startTestServer({}, { clock });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  async function ok(method: string, body: unknown): Promise<any> {
    const res = await t.call(method, body);
    expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
    return res.body;
  }

  async function claim(queue: string, maxJobs = 1): Promise<Array<{ job: { id: string }; leaseToken: string }>> {
    return (await ok("Claim", { queue, workerId: "chart-worker", maxJobs, leaseDuration: "7200s" })).leases ?? [];
  }

  async function complete(lease: { job: { id: string }; leaseToken: string }): Promise<void> {
    await ok("Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken });
  }

  /** The chart's total of one series, as the page drew it. */
  async function drawnTotal(page: Page, chart: string, series: string): Promise<number> {
    return Number(await page.getByTestId(`chart-${chart}`).getAttribute(`data-total-${series}`));
  }

  it("draws a queue's last hour, and moves as jobs complete, live", async () => {
    // Forty minutes of work: jobs submitted each minute, most leased a little later and completed, some failing once.
    for (let minute = 0; minute < 40; minute++) {
      await ok("SubmitBatch", { jobs: Array.from({ length: 4 + (minute % 5) }, () => ({ queue: "charts", task: "thumbnail.render" })) });
      clock.advance(15_000 + (minute % 3) * 10_000);
      const leases = await claim("charts", 3 + (minute % 4));
      for (const [i, lease] of leases.entries()) {
        if (i === 0 && minute % 6 === 0)
          await ok("Fail", { jobId: lease.job.id, leaseToken: lease.leaseToken, error: "timeout", retryDelay: "0s" });
        else await complete(lease);
      }
      clock.set(Math.floor(clock.now() / MINUTE) * MINUTE + MINUTE);
    }
    // Now is 59 min 20 s after the first minute: the hour's window starts with it.
    clock.advance(19 * MINUTE + 20_000);
    await claim("charts", 2);

    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/#/`);
    await page.getByRole("link", { name: "Activity of queue charts" }).click();
    await page.locator("h1", { hasText: "Queue charts" }).waitFor();
    const throughput = page.getByTestId("chart-throughput");
    await throughput.waitFor();
    for (const chart of ["throughput", "depth", "wait"])
      expect(await page.getByTestId(`chart-${chart}`).getAttribute("data-points")).toBe("60");
    const completed = await drawnTotal(page, "throughput", "completed");
    expect(completed).toBeGreaterThan(100);
    expect(await drawnTotal(page, "throughput", "failed")).toBe(7);
    expect(await throughput.locator('rect[data-series="completed"]').count()).toBe(40);
    expect(await page.getByTestId("chart-wait").locator('[data-series="p95"] circle').count()).toBeGreaterThan(0);
    await page.locator('[data-live-mode="live"]').waitFor();
    await page.screenshot({ path: `${ARTIFACTS}console-queue-activity.png`, fullPage: true });

    // Jobs complete now: the chart of the current minute grows without a reload.
    await markDocument(page);
    const running = await claim("charts", 3);
    for (const lease of running) await complete(lease);
    await page.locator(`[data-testid="chart-throughput"][data-total-completed="${completed + running.length}"]`).waitFor();
    const now = throughput.locator('rect[data-series="completed"]').last();
    expect(Number(await now.getAttribute("data-value"))).toBe(running.length);
    await expectSameDocument(page);
    await page.screenshot({ path: `${ARTIFACTS}console-queue-activity-live.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();

    // The dark scheme draws the same, in its own colours.
    const dark = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "dark" });
    const darkPage = await dark.newPage();
    darkPage.setDefaultTimeout(UI_TIMEOUT_MS);
    await darkPage.goto(`${t.apiUrl}/#/queues/charts`);
    await darkPage.getByTestId("chart-throughput").waitFor();
    const fill = await darkPage
      .locator('rect[data-series="completed"]')
      .first()
      .evaluate((el) => (globalThis as any).getComputedStyle(el).fill as string);
    expect(fill).toBe("rgb(127, 209, 174)");
    await darkPage.screenshot({ path: `${ARTIFACTS}console-queue-activity-dark.png`, fullPage: true });
    await dark.close();
  });

  it("draws a job's attempts to scale: queued, running, retry, running again, completed", async () => {
    const id = (await ok("Submit", { queue: "attempts", task: "report.build" })).job.id as string;
    clock.advance(10_000);
    const [first] = await claim("attempts");
    clock.advance(20_000);
    await ok("Fail", { jobId: id, leaseToken: first.leaseToken, error: "upstream 503", retryDelay: "30s" });
    clock.advance(30_000);
    const [second] = await claim("attempts");
    clock.advance(40_000);
    await complete(second);

    const { page, errors } = await openWatchedPage(browser, `${t.apiUrl}/#/jobs/${id}`);
    const timeline = page.getByTestId("attempt-timeline");
    await timeline.waitFor();
    const bands = await timeline
      .locator("rect")
      .evaluateAll((rects) =>
        rects.map((r) => [r.getAttribute("data-state"), r.getAttribute("data-attempt"), Number(r.getAttribute("width"))] as const),
      );
    // 10 s queued, 20 s running, 30 s in retry, 40 s running: 100 s across the 720 units of the drawing, then the end mark.
    expect(bands).toEqual([
      ["queued", null, 72],
      ["running", "1", 144],
      ["retry", null, 216],
      ["running", "2", 288],
      ["completed", null, 4],
    ]);
    expect(await page.locator("#attempts-title").textContent()).toBe("2 attempts over 1 min 40 s");
    expect(await timeline.textContent()).toContain("attempt 2");
    await page.screenshot({ path: `${ARTIFACTS}console-job-attempts.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();
  });
});

/**
 * With LEASEQUEUE_AUTH_FILE set: the console asks for a token when the API
 * says `unauthenticated`, says so when the token is refused, keeps the token
 * in the tab's sessionStorage only (not localStorage, a cookie or the URL),
 * sends it on every call (the WatchEvents stream too), and works: live
 * updates and actions. A token without a role shows the API's refusal.
 */
describe.skipIf(!available && !IN_CI)("operations console in chromium, with authentication on", { timeout: TEST_TIMEOUT_MS }, () => {
  let browser: Browser;
  let t: TestServer;
  let dir: string;
  let tokens: Record<string, string>;

  beforeAll(async () => {
    prepareBrowserTest("scripts/build-console.mjs", consoleBuilt);
    dir = mkdtempSync(join(tmpdir(), "leasequeue-console-auth-"));
    const file = writeAuthFile(dir, [
      { name: "ops", roles: ["operator", "reader"] },
      { name: "viewer", roles: ["reader"] },
      { name: "ci", roles: ["producer", "worker", "operator", "reader"] },
    ]);
    tokens = file.tokens;
    t = await startTestServer({ "auth-file": file.path });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run"],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh tab (its own sessionStorage), its console errors except the 401/403 answers Chromium reports. */
  async function openTab(hash = "#/"): Promise<ConsolePage & { sentTokens: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    // The page's timers run on a clock the test can move (untilLive).
    await context.clock.install();
    const page = await context.newPage();
    const errors: string[] = [];
    const sentTokens: string[] = [];
    page.on("console", (msg: ConsoleMessage) => {
      if (msg.type() === "error" && !/status of 40[13]/.test(msg.text())) errors.push(msg.text());
    });
    page.on("pageerror", (err) => errors.push(`uncaught: ${err.message}`));
    page.on("request", (req) => {
      if (req.url().includes("/leasequeue.v1.LeaseQueueService/")) sentTokens.push(req.headers()["authorization"] ?? "");
    });
    await page.addInitScript({ content: REPORT_CSP_VIOLATIONS });
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(`${t.apiUrl}/${hash}`);
    return { page, errors, sentTokens };
  }

  async function markTab(page: Page): Promise<void> {
    await page.evaluate(() => {
      (globalThis as { __tab?: boolean }).__tab = true;
    });
  }

  async function giveToken(page: Page, token: string): Promise<void> {
    await page.getByLabel("Access token", { exact: true }).fill(token);
    await page.getByRole("button", { name: "Use token" }).click();
  }

  const as = (name: string) => bearer(tokens[name]);

  it("asks for a token, says when it is refused, then works live with the right one", async () => {
    const before = await t.call("Submit", { queue: "secured", task: "report.build" }, as("ci"));
    expect(before.status).toBe(200);
    const { page, errors, sentTokens } = await openTab();
    const prompt = page.getByTestId("token-prompt");
    await prompt.waitFor();
    expect(await page.getByTestId("token-reason").textContent()).toMatch(/requires a bearer token/);
    await page.screenshot({ path: `${ARTIFACTS}console-token-prompt.png` });

    await giveToken(page, "lq_" + "w".repeat(43));
    await page
      .getByTestId("token-reason")
      .getByText(/refused that token/)
      .waitFor();
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("leasequeue.token"))).toBeNull();

    await giveToken(page, tokens.ops);
    await page.locator('tr[data-queue="secured"] td[data-state="queued"]').getByText("1").waitFor();
    expect(await prompt.count()).toBe(0);
    // A token given subscribes again at once, unless an attempt without it was on its way: then after the backoff.
    await untilLive(page);
    await markTab(page);

    // Live: a job submitted now shows up without a reload, over the authenticated stream.
    await t.call("Submit", { queue: "secured", task: "report.build" }, as("ci"));
    await page.locator('tr[data-queue="secured"] td[data-state="queued"]').getByText("2").waitFor();
    expect(await page.evaluate(() => (globalThis as { __tab?: boolean }).__tab)).toBe(true);

    // Kept in this tab's sessionStorage, nowhere else.
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("leasequeue.token"))).toBe(tokens.ops);
    expect(await page.evaluate(() => Object.keys((globalThis as any).localStorage))).toEqual([]);
    expect(await page.evaluate(() => (globalThis as any).document.cookie)).toBe("");
    expect(page.url()).not.toContain(tokens.ops);
    // Every call after the right token was given carried it, WatchEvents included.
    const afterToken = sentTokens.slice(sentTokens.lastIndexOf(`Bearer ${"lq_" + "w".repeat(43)}`) + 1);
    expect(afterToken.length).toBeGreaterThan(0);
    expect(new Set(afterToken)).toEqual(new Set([`Bearer ${tokens.ops}`]));
    await page.screenshot({ path: `${ARTIFACTS}console-authenticated.png` });

    // A reload of the tab keeps the token; a new tab asks again.
    await page.reload();
    await page.locator('tr[data-queue="secured"]').waitFor();
    expect(await prompt.count()).toBe(0);
    const other = await openTab();
    await other.page.getByTestId("token-prompt").waitFor();
    await other.page.context().close();

    // Forgetting the token asks for one again.
    await page.getByTestId("forget-token").click();
    await prompt.waitFor();
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("leasequeue.token"))).toBeNull();
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("redrives with an operator's token, and shows the API's refusal to a reader's", async () => {
    const submitted = await t.call("Submit", { queue: "secured-mail", task: "email.send", maxAttempts: 1 }, as("ci"));
    const id = submitted.body.job.id as string;
    const lease = (await t.call("Claim", { queue: "secured-mail", workerId: "w" }, as("ci"))).body.leases[0];
    await t.call("Fail", { jobId: id, leaseToken: lease.leaseToken, error: "smtp down" }, as("ci"));

    const viewer = await openTab(`#/jobs/${id}`);
    await giveToken(viewer.page, tokens.viewer);
    await viewer.page.getByTestId("job-state").getByText("Dead").waitFor();
    await viewer.page.getByRole("button", { name: "Redrive…" }).click();
    await viewer.page.getByRole("button", { name: "Yes, redrive" }).click();
    const refused = viewer.page.getByTestId("action-outcome");
    await refused.waitFor();
    expect(await refused.textContent()).toBe(
      'Redrive failed: permission_denied: Redrive needs the role "operator"; token "viewer" has reader',
    );
    expect(viewer.errors).toEqual([]);
    await viewer.page.context().close();

    const ops = await openTab(`#/jobs/${id}`);
    await giveToken(ops.page, tokens.ops);
    await ops.page.getByTestId("job-state").getByText("Dead").waitFor();
    await ops.page.getByRole("button", { name: "Redrive…" }).click();
    await ops.page.getByRole("button", { name: "Yes, redrive" }).click();
    await ops.page.getByTestId("action-outcome").getByText("Redriven: the job is now Queued.").waitFor();
    expect((await t.call("GetJob", { jobId: id }, as("ci"))).body.job.state).toBe("JOB_STATE_QUEUED");
    expect(ops.errors).toEqual([]);
    await ops.page.context().close();
  });
});

/**
 * LEASEQUEUE_DOCS_SCREENSHOT=1 npx vitest run test/browser -t "docs screenshot"
 * rewrites docs/console.png: the queues overview of a server with jobs in
 * every state, made over the last 40 minutes of a manual clock.
 */
describe.runIf(available && process.env.LEASEQUEUE_DOCS_SCREENSHOT === "1")("docs screenshot", { timeout: TEST_TIMEOUT_MS }, () => {
  it("writes docs/console.png", async () => {
    const minute = 60_000;
    const clock = new ManualClock(Date.now() - 40 * minute);
    const t = await startTestServer({}, { clock });
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
    try {
      const submit = async (queue: string, task: string, extra: Record<string, unknown> = {}): Promise<string> => {
        clock.advance(minute);
        return (await t.call("Submit", { queue, task, ...extra })).body.job.id;
      };
      const claim = async (queue: string) =>
        (await t.call("Claim", { queue, workerId: `${queue}-worker-1`, leaseDuration: "7200s" })).body.leases[0];
      const complete = async (queue: string) => {
        const lease = await claim(queue);
        await t.call("Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken, result: { ok: true } });
      };
      const fail = async (queue: string, error: string) => {
        const lease = await claim(queue);
        await t.call("Fail", { jobId: lease.job.id, leaseToken: lease.leaseToken, error, retryDelay: "3600s" });
      };

      for (let i = 0; i < 9; i++) await submit("billing", "invoice.generate", { payload: { invoiceId: `inv_${480 + i}` } });
      for (let i = 0; i < 5; i++) await complete("billing");
      await claim("billing");
      await submit("emails", "digest.send", { maxAttempts: 1, priority: 10 });
      await fail("emails", "smtp: connection refused");
      for (let i = 0; i < 7; i++) await submit("emails", "welcome.send", { payload: { to: `user${i}@example.com` } });
      await complete("emails");
      await fail("emails", "smtp: 421 try again later");
      await claim("emails");
      await claim("emails");
      await submit("reports", "report.weekly");
      const monthly = await submit("reports", "report.monthly", { delay: "3600s" });
      await t.call("Cancel", { jobId: monthly, reason: "superseded by report.quarterly" });
      clock.set(Date.now());

      const page = await browser.newPage({ viewport: { width: 1220, height: 380 }, deviceScaleFactor: 1 });
      await page.goto(`${t.apiUrl}/#/`);
      await page.locator('tr[data-queue="reports"]').waitFor();
      await page.locator('[data-live-mode="live"]').waitFor();
      mkdirSync(`${REPO_ROOT}docs`, { recursive: true });
      await page.screenshot({ path: `${REPO_ROOT}docs/console.png` });
      await page.goto(`${t.apiUrl}/#/jobs`);
      await page.getByTestId("jobs-table").waitFor();
      await page.screenshot({ path: `${ARTIFACTS}docs-jobs.png` });
    } finally {
      await browser.close();
      await t.close();
    }
  });
});
