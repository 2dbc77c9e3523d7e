/**
 * LeaseQueue operations console: entry point. Bundled by
 * scripts/build-console.mjs into dist/console/ and served at / on the API port
 * by src/server/console-files.ts.
 */
import "./app.css";
import { render } from "preact";
import { useEffect } from "preact/hooks";
import { LiveBanner, LiveIndicator } from "./components.js";
import { consoleAuth } from "./auth.js";
import { liveFeed } from "./live.js";
import { jobsHref, useRoute, type Route } from "./router.js";
import { Groups } from "./views/groups.js";
import { JobPage } from "./views/job.js";
import { Jobs } from "./views/jobs.js";
import { Overview } from "./views/overview.js";
import { QueueActivityPage } from "./views/queue-activity.js";
import { Schedules } from "./views/schedules.js";
import { ForgetToken, TokenPrompt } from "./token-prompt.js";

function title(route: Route): string {
  switch (route.name) {
    case "overview":
      return "Queues";
    case "jobs":
      return "Jobs";
    case "job":
      return `Job ${route.id}`;
    case "queue":
      return `Queue ${route.queue}`;
    case "groups":
      return `Groups of ${route.queue}`;
    case "schedules":
      return "Schedules";
    case "unknown":
      return "Not found";
  }
}

function App() {
  const route = useRoute();
  useEffect(() => {
    document.title = `${title(route)} · LeaseQueue`;
  }, [route]);
  return (
    <>
      <a class="skip" href="#main" onClick={skipToMain}>
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href="#/">
          LeaseQueue
        </a>
        <nav aria-label="Sections">
          <a href="#/" aria-current={route.name === "overview" || route.name === "queue" || route.name === "groups" ? "page" : undefined}>
            Queues
          </a>
          <a href={jobsHref()} aria-current={route.name === "jobs" || route.name === "job" ? "page" : undefined}>
            Jobs
          </a>
          <a href="#/schedules" aria-current={route.name === "schedules" ? "page" : undefined}>
            Schedules
          </a>
          {/* The API reference (served by the same port unless production mode turned it off). */}
          <a href="/docs">API reference</a>
        </nav>
        <LiveIndicator />
        <ForgetToken />
      </header>
      <LiveBanner />
      <TokenPrompt />
      <main id="main" tabIndex={-1}>
        {route.name === "overview" && <Overview />}
        {route.name === "jobs" && (
          <Jobs
            queue={route.queue}
            group={route.group}
            state={route.state}
            dependenciesOf={route.dependenciesOf}
            dependentsOf={route.dependentsOf}
            page={route.page}
          />
        )}
        {route.name === "job" && <JobPage key={route.id} id={route.id} />}
        {route.name === "queue" && <QueueActivityPage key={route.queue} queue={route.queue} />}
        {route.name === "groups" && <Groups key={route.queue} queue={route.queue} />}
        {route.name === "schedules" && <Schedules />}
        {route.name === "unknown" && (
          <section>
            <h1>Not found</h1>
            <p>
              Nothing lives at <code>#{route.path}</code>. <a href="#/">Go to the queues</a>
            </p>
          </section>
        )}
      </main>
    </>
  );
}

/** With hash routing, "#main" would be read as a route: move focus instead. */
function skipToMain(e: MouseEvent): void {
  e.preventDefault();
  document.getElementById("main")?.focus();
}

// A token given (or forgotten): reopen the event stream now and refetch what failed.
consoleAuth.onToken(() => liveFeed.reconnectNow());
liveFeed.start();
render(<App />, document.getElementById("app")!);
