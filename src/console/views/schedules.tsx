/**
 * #/schedules : every schedule (docs/api.md "Schedules") with what it
 * submits, when it runs next and when it last ran, and an operator's
 * controls: pause or resume (CreateSchedule with the schedule as listed and
 * `paused` flipped, which replaces it), and delete after a confirmation step.
 * The list follows the live feed: a run's SCHEDULED event reloads it, so next
 * and last run move on screen as they happen.
 */
import type { TargetedSubmitEvent } from "preact";
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { formatDurationText } from "../../domain/duration-text.js";
import { EventKind, type Schedule } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { client } from "../api.js";
import { ErrorNotice, Time } from "../components.js";
import { durationMs, formatTime } from "../format.js";
import { useLive, useResource, useThrottled } from "../hooks.js";
import { jobsHref } from "../router.js";
import { attempt, OutcomeLine, type Outcome } from "./queue-controls.js";

/** The list is refetched at most this often while runs are announced. */
const REFRESH_MS = 1_000;

/** "cron 0 3 * * * (Europe/Berlin)" or "every 5 min". */
export function recurrenceText(s: Schedule): string {
  if (s.recurrence.case === "cron") return `cron ${s.recurrence.value} (${s.timezone || "UTC"})`;
  if (s.recurrence.case === "interval") return `every ${formatDurationText(durationMs(s.recurrence.value), "glance")}`;
  return "—";
}

export function Schedules() {
  const list = useResource((signal) => client.listSchedules({}, { signal }), []);
  const refresh = useThrottled(list.reload, REFRESH_MS);
  useLive((signal) => {
    if (signal.kind === "resync" || signal.event.kind === EventKind.SCHEDULED) refresh();
  });
  const [outcome, setOutcome] = useState<Outcome | undefined>();
  const [deleting, setDeleting] = useState<string | undefined>();
  const onOutcome = (o: Outcome): void => {
    setOutcome(o);
    list.reload();
  };

  return (
    <section aria-labelledby="schedules-title">
      <h1 id="schedules-title">Schedules</h1>
      {list.error && <ErrorNotice problem={list.error} what="the schedules" onRetry={list.reload} />}
      {list.data === undefined ? (
        !list.error && <p class="muted">Loading…</p>
      ) : list.data.schedules.length === 0 ? (
        <NoSchedulesYet />
      ) : (
        <div class="table-wrap">
          <table class="schedules" data-testid="schedules">
            <caption>Each run submits the schedule's job once, under the key schedule:&lt;name&gt;:&lt;run time&gt;. Times in UTC.</caption>
            <thead>
              <tr>
                <th scope="col">Schedule</th>
                <th scope="col">Runs</th>
                <th scope="col">Submits</th>
                <th scope="col">Next run</th>
                <th scope="col">Last run</th>
                <th scope="col">Controls</th>
              </tr>
            </thead>
            <tbody>
              {list.data.schedules.map((s) => (
                <ScheduleRow
                  key={s.name}
                  schedule={s}
                  onOutcome={onOutcome}
                  onDelete={() => {
                    setOutcome(undefined);
                    setDeleting(s.name);
                  }}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deleting !== undefined && <DeleteForm key={deleting} name={deleting} onOutcome={onOutcome} onClose={() => setDeleting(undefined)} />}
      <OutcomeLine outcome={outcome} />
    </section>
  );
}

function ScheduleRow({ schedule: s, onOutcome, onDelete }: { schedule: Schedule; onOutcome: (o: Outcome) => void; onDelete: () => void }) {
  const queue = s.template?.queue ?? "";
  return (
    <tr data-schedule={s.name} data-paused={String(s.paused)}>
      <th scope="row">
        {s.name}
        {s.paused && (
          <span class="badge paused" title="Paused: submits nothing until resumed">
            Paused
          </span>
        )}
      </th>
      <td>{recurrenceText(s)}</td>
      <td>
        <a href={jobsHref({ queue })}>{queue}</a> / {s.template?.task}
      </td>
      <td data-field="next-run">{s.paused ? <span class="muted">paused</span> : <Time ts={s.nextRunTime} />}</td>
      <td data-field="last-run">
        <Time ts={s.lastRunTime} />
      </td>
      <td>
        <div class="buttons compact">
          <PauseScheduleButton schedule={s} onOutcome={onOutcome} />
          <button type="button" class="quiet" aria-label={`Delete schedule ${s.name}`} onClick={onDelete}>
            Delete…
          </button>
        </div>
      </td>
    </tr>
  );
}

/** Pause or Resume: the schedule is sent back as listed, `paused` flipped (CreateSchedule replaces it). */
function PauseScheduleButton({ schedule, onOutcome }: { schedule: Schedule; onOutcome: (o: Outcome) => void }) {
  const [busy, setBusy] = useState(false);
  const label = schedule.paused ? "Resume" : "Pause";
  const toggle = async (): Promise<void> => {
    setBusy(true);
    const outcome = await attempt(label, async () => {
      const res = await client.createSchedule({
        schedule: { ...schedule, paused: !schedule.paused, nextRunTime: undefined, lastRunTime: undefined },
      });
      const saved = res.schedule;
      if (saved?.paused) return `Paused ${schedule.name}: it submits nothing until resumed.`;
      return `Resumed ${schedule.name}: next run ${saved?.nextRunTime ? formatTime(saved.nextRunTime) : "none"}.`;
    });
    setBusy(false);
    onOutcome(outcome);
  };
  return (
    <button type="button" class="quiet" disabled={busy} onClick={() => void toggle()} aria-label={`${label} schedule ${schedule.name}`}>
      {label}
    </button>
  );
}

/** Delete behind a confirmation; the jobs the schedule already submitted stay. */
function DeleteForm({ name, onOutcome, onClose }: { name: string; onOutcome: (o: Outcome) => void; onClose: () => void }) {
  const [busy, setBusy] = useState(false);
  const confirmRef = useRef<HTMLButtonElement>(null);
  // Focused before the confirmation paints (an effect would run later), as the other forms do.
  useLayoutEffect(() => confirmRef.current?.focus(), []);
  const onSubmit = async (e: TargetedSubmitEvent<HTMLFormElement>): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    const outcome = await attempt("Delete", async () => {
      await client.deleteSchedule({ name });
      return `Deleted schedule ${name}. The jobs it submitted stay.`;
    });
    setBusy(false);
    onOutcome(outcome);
    onClose();
  };
  return (
    <form class="confirm" onSubmit={(e) => void onSubmit(e)} aria-labelledby="delete-schedule-text" data-testid="delete-schedule-form">
      <p id="delete-schedule-text">
        Delete schedule <strong>{name}</strong>? It submits no more jobs; the jobs it already submitted stay.
      </p>
      <div class="buttons">
        <button type="submit" class="danger" ref={confirmRef} disabled={busy}>
          Yes, delete {name}
        </button>
        <button type="button" disabled={busy} onClick={onClose}>
          No, keep it
        </button>
      </div>
    </form>
  );
}

/** No schedule exists: say how to create one. */
function NoSchedulesYet() {
  const curl = [
    `curl -s ${location.origin}/leasequeue.v1.LeaseQueueService/CreateSchedule \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '{"schedule":{"name":"nightly-report","cron":"0 3 * * *","timezone":"Europe/Berlin",` +
      `"template":{"queue":"reports","task":"report.build"}}}'`,
  ].join("\n");
  return (
    <div class="empty" data-testid="no-schedules">
      <h2>No schedules yet</h2>
      <p>Create one and it appears here:</p>
      <pre>
        <code>{curl}</code>
      </pre>
    </div>
  );
}
