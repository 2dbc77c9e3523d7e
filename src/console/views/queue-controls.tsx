/**
 * An operator's controls over a whole queue (docs/api.md "Queue controls" and
 * "Queue limits"): pause and resume, redrive every dead job, purge every
 * pending job, set its limits. Each shows the API's answer, or its error code
 * and message, in an outcome line. The server decides every refusal: a purge
 * sends what the operator typed as `confirm`, and the server refuses it
 * unless it is the queue name.
 */
import type { TargetedSubmitEvent } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import type { QueueConfig } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { formatDurationText } from "../../domain/duration-text.js";
import { client, describeError } from "../api.js";
import { durationMs } from "../format.js";

export interface Outcome {
  ok: boolean;
  text: string;
}

/** Runs one API call; its success text, or "<what> failed: <code>: <message>". */
export async function attempt(what: string, call: () => Promise<string>): Promise<Outcome> {
  try {
    return { ok: true, text: await call() };
  } catch (err) {
    const problem = describeError(err);
    return { ok: false, text: `${what} failed: ${problem.code}: ${problem.message}` };
  }
}

function jobsCount(n: bigint): string {
  return n === 1n ? "1 job" : `${n} jobs`;
}

export function OutcomeLine({ outcome }: { outcome: Outcome | undefined }) {
  return (
    <div role="status" class="outcome-slot">
      {outcome && (
        <p class={outcome.ok ? "outcome ok" : "outcome fail"} data-testid="queue-outcome">
          {outcome.text}
        </p>
      )}
    </div>
  );
}

/**
 * A form that runs one API call on submit (purge, limits): busy while it
 * runs, its first input focused when it opens, the outcome reported, and
 * closed when the call succeeded.
 */
function useFormCall(what: string, call: () => Promise<string>, onOutcome: (o: Outcome) => void, onClose: () => void) {
  const [busy, setBusy] = useState(false);
  const inputRef = useRef<HTMLInputElement>(null);
  // Focused as the form is put in the page, before it paints: an effect runs
  // later, and would take the focus (and scroll the page) from a field
  // already being typed in.
  useLayoutEffect(() => inputRef.current?.focus(), []);
  const onSubmit = async (e: TargetedSubmitEvent<HTMLFormElement>): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    const outcome = await attempt(what, call);
    setBusy(false);
    onOutcome(outcome);
    if (outcome.ok) onClose();
  };
  return { busy, inputRef, onSubmit };
}

/** Pause or Resume in one click: each undoes the other, so neither asks for confirmation. */
export function PauseButton({ queue, paused, onOutcome }: { queue: string; paused: boolean; onOutcome: (o: Outcome) => void }) {
  const [busy, setBusy] = useState(false);
  const toggle = async (): Promise<void> => {
    setBusy(true);
    const outcome = await attempt(paused ? "Resume" : "Pause", async () => {
      if (paused) {
        await client.resumeQueue({ queue });
        return `Resumed ${queue}: workers get its jobs again.`;
      }
      await client.pauseQueue({ queue });
      return `Paused ${queue}: it keeps accepting jobs but hands out none until resumed.`;
    });
    setBusy(false);
    onOutcome(outcome);
  };
  const label = paused ? "Resume" : "Pause";
  return (
    <button type="button" class="quiet" disabled={busy} onClick={() => void toggle()} aria-label={`${label} queue ${queue}`}>
      {label}
    </button>
  );
}

/** Purge behind a typed confirmation: the operator types the queue name. */
export function PurgeForm({ queue, onOutcome, onClose }: { queue: string; onOutcome: (o: Outcome) => void; onClose: () => void }) {
  const [typed, setTyped] = useState("");
  const { busy, inputRef, onSubmit } = useFormCall(
    "Purge",
    async () => {
      const res = await client.purgeQueue({ queue, confirm: typed });
      return `Purged ${queue}: ${jobsCount(res.cancelled)} cancelled.`;
    },
    onOutcome,
    onClose,
  );

  return (
    <form class="confirm" onSubmit={(e) => void onSubmit(e)} aria-labelledby="purge-text" data-testid="purge-form">
      <p id="purge-text">
        Purge queue <strong>{queue}</strong>? Every queued, waiting and retry job is cancelled with the reason "purged"; running, dead and
        finished jobs stay. This cannot be undone.
      </p>
      <div class="field">
        <label for="purge-confirm">Type the queue name to confirm</label>
        <input
          id="purge-confirm"
          ref={inputRef}
          type="text"
          name="confirm"
          autoComplete="off"
          spellcheck={false}
          value={typed}
          onInput={(e) => setTyped(e.currentTarget.value)}
        />
      </div>
      <div class="buttons">
        <button type="submit" class="danger" disabled={busy}>
          Purge {queue}
        </button>
        <button type="button" disabled={busy} onClick={onClose}>
          No, keep the jobs
        </button>
      </div>
    </form>
  );
}

/** "Redrive all" on a queue's dead jobs, after a confirmation step. */
export function RedriveAllControl({ queue, onChanged }: { queue: string; onChanged: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | undefined>();
  const confirmRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) confirmRef.current?.focus();
  }, [confirming]);

  const onSubmit = async (e: TargetedSubmitEvent<HTMLFormElement>): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    const result = await attempt("Redrive all", async () => {
      const res = await client.redriveAll({ queue });
      return `Redriven: ${jobsCount(res.redriven)} of ${queue} back to Queued.`;
    });
    setBusy(false);
    setConfirming(false);
    setOutcome(result);
    if (result.ok) onChanged();
  };

  return (
    <section class="actions bulk" aria-label={`Dead jobs of ${queue}`}>
      {confirming ? (
        <form class="confirm" onSubmit={(e) => void onSubmit(e)} aria-labelledby="redrive-all-text" data-testid="redrive-all-form">
          <p id="redrive-all-text">
            Redrive every dead job of queue <strong>{queue}</strong>? They go back to Queued with their attempts reset to 0, and workers can
            claim them at once.
          </p>
          <div class="buttons">
            <button type="submit" ref={confirmRef} disabled={busy}>
              Yes, redrive all
            </button>
            <button type="button" disabled={busy} onClick={() => setConfirming(false)}>
              No
            </button>
          </div>
        </form>
      ) : (
        <div class="buttons">
          <button
            type="button"
            onClick={() => {
              setOutcome(undefined);
              setConfirming(true);
            }}
          >
            Redrive all dead jobs…
          </button>
        </div>
      )}
      <OutcomeLine outcome={outcome} />
    </section>
  );
}

/** What the console reads of a queue's config (QueueConfig), as QueueStats.config and UpdateQueue carry it. */
export type Limits = Pick<
  QueueConfig,
  "maxRunning" | "rateLimit" | "ratePeriod" | "groupMaxRunning" | "groupRateLimit" | "fair" | "ordered"
>;

/** True when the queue has a limit or group rule set (QueueConfig), i.e. describeLimits says more than "no limits". */
export function hasLimits(config: Limits | undefined): boolean {
  return (
    config !== undefined &&
    (config.maxRunning > 0 ||
      config.rateLimit > 0 ||
      config.groupMaxRunning > 0 ||
      config.groupRateLimit > 0 ||
      config.fair ||
      config.ordered)
  );
}

/**
 * A queue's limits and group rules in words: "at most 5 running, 100 leases
 * per 1 min, at most 2 running per group, fair turns", or "no limits".
 */
export function describeLimits(config: Limits | undefined): string {
  if (config === undefined || !hasLimits(config)) return "no limits";
  const period = formatDurationText(durationMs(config.ratePeriod) || 1000, "spelled");
  const parts: string[] = [];
  if (config.maxRunning > 0) parts.push(`at most ${config.maxRunning} running`);
  if (config.rateLimit > 0) parts.push(`${config.rateLimit} leases per ${period}`);
  if (config.groupMaxRunning > 0) parts.push(`at most ${config.groupMaxRunning} running per group`);
  if (config.groupRateLimit > 0) parts.push(`${config.groupRateLimit} leases per group per ${period}`);
  if (config.fair) parts.push("fair turns");
  if (config.ordered) parts.push("ordered groups");
  return parts.join(", ");
}

/** The period of rate_limit and group_rate_limit as the form shows it: absent means 1 s (QueueConfig.rate_period). */
function periodSeconds(config: Limits | undefined): number {
  const ms = durationMs(config?.ratePeriod);
  return ms > 0 ? ms / 1000 : 1;
}

/**
 * A queue's limits and group rules (docs/api.md "Queue limits" and
 * "Groups", UpdateQueue): most jobs running at once and most leases per period, for
 * the queue and for each of its groups, across every worker and server (0
 * turns a limit off); fair turns across groups; ordered groups. Only the
 * fields the operator changed are sent, named in the update mask, so a
 * change made meanwhile to another field (by another operator, or the API)
 * stays. The server checks the bounds and names a bad field (the inputs set
 * no bounds of their own, so the browser never second-guesses it).
 */
export function LimitsForm({
  queue,
  current,
  onOutcome,
  onClose,
}: {
  queue: string;
  current: Limits | undefined;
  onOutcome: (o: Outcome) => void;
  onClose: () => void;
}) {
  const [maxRunning, setMaxRunning] = useState(String(current?.maxRunning ?? 0));
  const [rateLimit, setRateLimit] = useState(String(current?.rateLimit ?? 0));
  const [ratePeriod, setRatePeriod] = useState(String(periodSeconds(current)));
  const [groupMaxRunning, setGroupMaxRunning] = useState(String(current?.groupMaxRunning ?? 0));
  const [groupRateLimit, setGroupRateLimit] = useState(String(current?.groupRateLimit ?? 0));
  const [fair, setFair] = useState(current?.fair ?? false);
  const [ordered, setOrdered] = useState(current?.ordered ?? false);
  // What the form opened with: a field is changed when its input differs from this (not from a later reload).
  const [opened] = useState(current);
  const { busy, inputRef, onSubmit } = useFormCall(
    "Limits",
    async () => {
      // Whole numbers are all the wire can carry for the counts; bounds are the server's to check.
      const count = (label: string, text: string): number => {
        const n = Number(text);
        if (!Number.isSafeInteger(n)) throw new ConnectError(`${label} must be a whole number, got "${text}"`, Code.InvalidArgument);
        return n;
      };
      const seconds = Number(ratePeriod);
      if (!Number.isFinite(seconds))
        throw new ConnectError(`the period must be a number of seconds, got "${ratePeriod}"`, Code.InvalidArgument);
      const config = {
        maxRunning: count("most jobs running", maxRunning),
        rateLimit: count("most leases per period", rateLimit),
        ratePeriod: { seconds: BigInt(Math.trunc(seconds)), nanos: Math.round((seconds % 1) * 1e9) },
        groupMaxRunning: count("most jobs of a group running", groupMaxRunning),
        groupRateLimit: count("most leases of a group per period", groupRateLimit),
        fair,
        ordered,
      };
      // The mask's paths (UpdateQueueRequest.update_mask): the fields that differ from what the form opened with.
      const paths = [
        config.maxRunning !== (opened?.maxRunning ?? 0) && "max_running",
        config.rateLimit !== (opened?.rateLimit ?? 0) && "rate_limit",
        seconds !== periodSeconds(opened) && "rate_period",
        config.groupMaxRunning !== (opened?.groupMaxRunning ?? 0) && "group_max_running",
        config.groupRateLimit !== (opened?.groupRateLimit ?? 0) && "group_rate_limit",
        config.fair !== (opened?.fair ?? false) && "fair",
        config.ordered !== (opened?.ordered ?? false) && "ordered",
      ].filter((p): p is string => p !== false);
      // An empty mask would replace every field: with nothing changed, nothing is sent.
      if (paths.length === 0) return `Limits of ${queue} unchanged: ${describeLimits(current)}.`;
      const res = await client.updateQueue({ queue, config, updateMask: { paths } });
      return `Limits of ${queue}: ${describeLimits(res.config)}.`;
    },
    onOutcome,
    onClose,
  );

  return (
    <form class="confirm" onSubmit={(e) => void onSubmit(e)} aria-labelledby="limits-text" data-testid="limits-form">
      <p id="limits-text">
        Limits of queue <strong>{queue}</strong>, for every worker and server at once (0: no limit). Now: {describeLimits(current)}.
      </p>
      <div class="field">
        <label for="limits-max-running">Most jobs running at once</label>
        <input
          id="limits-max-running"
          ref={inputRef}
          type="number"
          step="any"
          value={maxRunning}
          onInput={(e) => setMaxRunning(e.currentTarget.value)}
        />
      </div>
      <div class="field">
        <label for="limits-rate-limit">Most leases per period</label>
        <input id="limits-rate-limit" type="number" step="any" value={rateLimit} onInput={(e) => setRateLimit(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="limits-rate-period">Period (seconds)</label>
        <input id="limits-rate-period" type="number" step="any" value={ratePeriod} onInput={(e) => setRatePeriod(e.currentTarget.value)} />
      </div>
      <fieldset class="group-rules">
        <legend>Per group (jobs submitted with a group key)</legend>
        <div class="field">
          <label for="limits-group-max-running">Most jobs of one group running at once</label>
          <input
            id="limits-group-max-running"
            type="number"
            step="any"
            value={groupMaxRunning}
            onInput={(e) => setGroupMaxRunning(e.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="limits-group-rate-limit">Most leases of one group per period</label>
          <input
            id="limits-group-rate-limit"
            type="number"
            step="any"
            value={groupRateLimit}
            onInput={(e) => setGroupRateLimit(e.currentTarget.value)}
          />
        </div>
        <div class="field check">
          <input id="limits-fair" type="checkbox" checked={fair} onChange={(e) => setFair(e.currentTarget.checked)} />
          <label for="limits-fair">Fair: leases go round robin across the groups with eligible jobs</label>
        </div>
        <div class="field check">
          <input id="limits-ordered" type="checkbox" checked={ordered} onChange={(e) => setOrdered(e.currentTarget.checked)} />
          <label for="limits-ordered">Ordered: one job of a group at a time, in submission order</label>
        </div>
      </fieldset>
      <div class="buttons">
        <button type="submit" disabled={busy}>
          Set limits of {queue}
        </button>
        <button type="button" disabled={busy} onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}
