/**
 * Queue limits (docs/api.md "Queue limits", QueueConfig): at most
 * `maxRunning` jobs of a queue RUNNING at once, and at most `rateLimit`
 * leases handed out in any window of `ratePeriodMs`, whoever claims. The
 * store enforces them in the claim (store/operations/claim.ts) with what it
 * reads in the claim's transaction; the arithmetic lives here so that every
 * engine applies the same rule.
 *
 * The rate window is a sliding one, and exact: a claim at `now` counts the
 * leases granted at times g with now - ratePeriodMs < g <= now (every
 * window of that length that holds `now` holds no others), and may hand out
 * what is left of `rateLimit`. So no window of length ratePeriodMs, wherever
 * it starts, ever holds more than `rateLimit` leases. Only leases granted
 * while the queue had a rate limit are counted (grants are recorded for
 * rate-limited queues only).
 */
import { DEFAULTS } from "./request-bounds.js";

/** A queue's limits; 0 means none. */
export interface QueueConfig {
  maxRunning: number;
  rateLimit: number;
  /** The window of rateLimit, in milliseconds (DEFAULTS.ratePeriodMs unless set). */
  ratePeriodMs: number;
}

/** A queue that was never configured, or whose limits were all removed. */
export const NO_QUEUE_LIMITS: Readonly<QueueConfig> = Object.freeze({ maxRunning: 0, rateLimit: 0, ratePeriodMs: DEFAULTS.ratePeriodMs });

export type QueueConfigField = keyof QueueConfig;

export const QUEUE_CONFIG_FIELDS: readonly QueueConfigField[] = ["maxRunning", "rateLimit", "ratePeriodMs"];

/** An UpdateQueue: the fields named (its update_mask) take their values from `config`; the others keep theirs. */
export interface QueueConfigUpdate {
  config: QueueConfig;
  fields: readonly QueueConfigField[];
}

export function hasLimits(config: QueueConfig): boolean {
  return config.maxRunning > 0 || config.rateLimit > 0;
}

export function applyConfigUpdate(current: QueueConfig, update: QueueConfigUpdate): QueueConfig {
  const next = { ...current };
  for (const field of update.fields) next[field] = update.config[field];
  return next;
}

export function sameConfig(a: QueueConfig, b: QueueConfig): boolean {
  return QUEUE_CONFIG_FIELDS.every((f) => a[f] === b[f]);
}

/** Which limit kept a claim from taking an eligible job. */
export type QueueLimit = "max_running" | "rate_limit";

/**
 * Why a claim handed out fewer leases than it asked for although eligible
 * jobs were left: `max_running` frees a place when one of the queue's
 * leases finishes; `rate_limit` frees one at `until` (epoch ms), when the
 * oldest lease of the window leaves it.
 */
export type ClaimHold = { limit: "max_running" } | { limit: "rate_limit"; until: number };

/** Leases of a rate-limited queue granted inside the current window. */
export interface WindowGrants {
  leases: number;
  /** Time of the oldest grant inside the window; null when none. */
  oldest: number | null;
}

/** Grants with a time after this one are inside the window of a claim at `now`. */
export function rateWindowStart(config: QueueConfig, now: number): number {
  return now - config.ratePeriodMs;
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
