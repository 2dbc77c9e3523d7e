/**
 * Queue limits (docs/api.md "Queue limits", QueueConfig): at most
 * `maxRunning` jobs of a queue RUNNING at once, and at most `rateLimit`
 * leases handed out in any window of `ratePeriodMs`, whoever claims. The
 * store enforces them in the claim (store/operations/claim.ts) with what it
 * reads in the claim's transaction; the arithmetic lives here so that every
 * engine applies the same rule.
 */
import { DEFAULTS } from "./request-bounds.js";

/** A queue's limits and group rules (docs/api.md "Queue limits", "Groups"); 0 and false mean none. */
export interface QueueConfig {
  maxRunning: number;
  rateLimit: number;
  /** The window of rateLimit and groupRateLimit, in milliseconds (DEFAULTS.ratePeriodMs unless set). */
  ratePeriodMs: number;
  /** Most RUNNING jobs of one group at once. */
  groupMaxRunning: number;
  /** Most leases of one group in any window of ratePeriodMs. */
  groupRateLimit: number;
  /** Leases go round robin across the groups with eligible jobs, least recently served first. */
  fair: boolean;
  /** Within a group, one job at a time in submission order. */
  ordered: boolean;
}

/** A queue that was never configured, or whose limits were all removed. */
export const NO_QUEUE_LIMITS: Readonly<QueueConfig> = Object.freeze({
  maxRunning: 0,
  rateLimit: 0,
  ratePeriodMs: DEFAULTS.ratePeriodMs,
  groupMaxRunning: 0,
  groupRateLimit: 0,
  fair: false,
  ordered: false,
});

export type QueueConfigField = keyof QueueConfig;

export const QUEUE_CONFIG_FIELDS: readonly QueueConfigField[] = [
  "maxRunning",
  "rateLimit",
  "ratePeriodMs",
  "groupMaxRunning",
  "groupRateLimit",
  "fair",
  "ordered",
];

/** An UpdateQueue: the fields named (its update_mask) take their values from `config`; the others keep theirs. */
export interface QueueConfigUpdate {
  config: QueueConfig;
  fields: readonly QueueConfigField[];
}

/** The config fields of a value that carries them among others (a row, a message). */
export function pickConfig(o: QueueConfig): QueueConfig {
  const { maxRunning, rateLimit, ratePeriodMs, groupMaxRunning, groupRateLimit, fair, ordered } = o;
  return { maxRunning, rateLimit, ratePeriodMs, groupMaxRunning, groupRateLimit, fair, ordered };
}

export function hasLimits(config: QueueConfig): boolean {
  return config.maxRunning > 0 || config.rateLimit > 0 || hasGroupRules(config);
}

/** Whether a claim of the queue must look at groups (docs/api.md "Groups"). */
export function hasGroupRules(config: QueueConfig): boolean {
  return config.groupMaxRunning > 0 || config.groupRateLimit > 0 || config.fair || config.ordered;
}

/** Whether the rules that bound one group (not fair, which orders groups) apply to a job of this group: jobs without a group are not bounded. */
export function boundsGroup(config: QueueConfig, groupKey: string): boolean {
  return groupKey !== "" && (config.groupMaxRunning > 0 || config.groupRateLimit > 0 || config.ordered);
}

export function applyConfigUpdate(current: QueueConfig, update: QueueConfigUpdate): QueueConfig {
  const next: Record<QueueConfigField, number | boolean> = { ...current };
  for (const field of update.fields) next[field] = update.config[field];
  return next as unknown as QueueConfig;
}

export function sameConfig(a: QueueConfig, b: QueueConfig): boolean {
  return QUEUE_CONFIG_FIELDS.every((f) => a[f] === b[f]);
}

/** Which limit kept a claim from taking an eligible job. */
export type QueueLimit = "max_running" | "rate_limit" | GroupLimit;

/** Which group rule kept a claim from taking an eligible job. */
export type GroupLimit = "group_max_running" | "group_rate_limit" | "ordered";

/**
 * Why a claim handed out fewer leases than it asked for although eligible
 * jobs were left: `max_running` frees a place when one of the queue's
 * leases finishes; `rate_limit` frees one at `until` (epoch ms), when the
 * oldest lease of the window leaves it. A group hold names the rule that
 * held the first group held back; what frees one of the held groups is a
 * finishing lease of the queue (`onFinish`: a group was held by
 * group_max_running or by an ordered head that is running) or the time
 * `until` (a group's rate window, an ordered head's or another job's
 * schedule_time), whichever comes first.
 */
export type ClaimHold =
  { limit: "max_running" } | { limit: "rate_limit"; until: number } | { limit: GroupLimit; onFinish: boolean; until: number | null };

/** Whether a lease of the queue that finishes may free what held the claim. */
export function freedByFinishingLease(hold: ClaimHold): boolean {
  return hold.limit === "max_running" || ("onFinish" in hold && hold.onFinish);
}

/** When time alone frees what held the claim (epoch ms), or null. */
export function holdUntil(hold: ClaimHold): number | null {
  return "until" in hold ? hold.until : null;
}

/** Leases of a rate-limited queue granted inside the current window. */
export interface WindowGrants {
  leases: number;
  /** Time of the oldest grant inside the window; null when none. */
  oldest: number | null;
}

/**
 * Grants with a time after this one are inside the window of a claim at `now`.
 *
 * The rate window is a sliding one, and exact: a claim at `now` counts the
 * leases granted at times g with now - ratePeriodMs < g <= now (every
 * window of that length that holds `now` holds no others), and may hand out
 * what is left of `rateLimit`. So no window of length ratePeriodMs, wherever
 * it starts, ever holds more than `rateLimit` leases. Only leases granted
 * while the queue had a rate limit are counted (grants are recorded for
 * rate-limited queues only).
 */
export function rateWindowStart(config: QueueConfig, now: number): number {
  return now - config.ratePeriodMs;
}

/**
 * How far behind another claim's time may be, at least, and its grants still
 * be counted right: a claim reads its time before it waits for its queue's
 * turn (and servers' clocks differ a little), so claims may commit out of
 * time order. A claim counts every grant after its window's start, later ones
 * too, so it only needs none of those forgotten.
 */
const GRANT_MEMORY_MARGIN_MS = 10_000;

/** Grants at or before this time are forgotten by a claim at `now`: older than its window by the margin (or a window's length, if longer). */
export function grantsForgottenThrough(config: QueueConfig, now: number): number {
  return rateWindowStart(config, now) - Math.max(config.ratePeriodMs, GRANT_MEMORY_MARGIN_MS);
}

/** How many leases each limit still allows now (Infinity: that limit is off). */
export interface LeaseRoom {
  running: number;
  rate: number;
}

export function leaseRoom(config: QueueConfig, running: number, window: WindowGrants): LeaseRoom {
  return {
    running: config.maxRunning > 0 ? Math.max(0, config.maxRunning - running) : Infinity,
    rate: config.rateLimit > 0 ? Math.max(0, config.rateLimit - window.leases) : Infinity,
  };
}

/**
 * The hold of a claim at `now` that left eligible
 * jobs behind: the tighter limit. When both allow equally little, max_running
 * is named (a finishing lease is the first thing to wait for; the claim then
 * names the rate limit if that still binds).
 */
export function holdOf(config: QueueConfig, room: LeaseRoom, window: WindowGrants, now: number): ClaimHold {
  if (room.running <= room.rate) return { limit: "max_running" };
  // The claim's own grant (if any) is at `now`, never older than the window's oldest.
  return { limit: "rate_limit", until: (window.oldest ?? now) + config.ratePeriodMs };
}
