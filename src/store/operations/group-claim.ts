/**
 * The claim's selection under group rules (docs/api.md "Groups"): which of
 * a queue's eligible jobs a claim may lease when the queue has
 * group_max_running, group_rate_limit, ordered or fair set. claim.ts calls
 * it with how many leases the queue's own limits leave (`target`); it
 * answers the jobs, in the order to lease them, and the hold of the groups
 * it had to pass over. One place for both engines and every lease path.
 */
import type { StoredJob } from "../../domain/job.js";
import { boundsGroup, type ClaimHold, type GroupLimit, type QueueConfig, type WindowGrants } from "../../domain/queue-limits.js";
import { allAtOnce, andThen, repeatWhile } from "./steps.js";
import type { Awaitable, DueGroup, TransactionPort } from "../transaction-port.js";

/** Most jobs a claim of a queue with group rules but not fair looks at. */
export const MAX_SCANNED = 1000;
/** How soon a claim held back by an ordered head that another transaction holds looks again (ms). */
export const BUSY_HEAD_RETRY_MS = 50;
/** Groups a fair claim reads in one page. */
const GROUP_PAGE = 64;

const NO_GRANTS: WindowGrants = Object.freeze({ leases: 0, oldest: null });

export interface GroupSelection {
  /** The jobs to lease, in order. */
  jobs: StoredJob[];
  /** What held back the groups the claim passed over with eligible jobs; null when none was. */
  hold: Extract<ClaimHold, { limit: GroupLimit }> | null;
}

/** One group as the claim reads it in its transaction, with its own takes added. */
interface SeenGroup {
  running: number;
  grants: WindowGrants;
  /** Ordered queues: the group's head; null when it has no open job. */
  head: StoredJob | null;
  /** Another transaction holds the pending head (TransactionPort.orderedHead). */
  headBusy: boolean;
  taken: number;
}

type Room = { room: number; hold: null } | { room: 0; hold: { limit: GroupLimit; onFinish: boolean; until: number | null } };

/**
 * What the group may still have now: group_max_running less its RUNNING
 * jobs, group_rate_limit less its grants in the sliding window (the
 * queue's rule, per group: domain/queue-limits.ts), and under ordered one
 * job, its head (the open job submitted first), only while that head is
 * pending and due. Jobs without a group are bounded by none of these.
 */
export function groupRoom(config: QueueConfig, seen: SeenGroup, now: number): Room {
  let room = Infinity;
  if (config.groupMaxRunning > 0) {
    room = Math.min(room, config.groupMaxRunning - seen.running - seen.taken);
    if (room <= 0) return { room: 0, hold: { limit: "group_max_running", onFinish: true, until: null } };
  }
  if (config.groupRateLimit > 0) {
    room = Math.min(room, config.groupRateLimit - seen.grants.leases - seen.taken);
    if (room <= 0) {
      // The claim's own grants are at `now`, never older than the window's oldest.
      return { room: 0, hold: { limit: "group_rate_limit", onFinish: false, until: (seen.grants.oldest ?? now) + config.ratePeriodMs } };
    }
  }
  if (config.ordered) {
    const head = seen.head;
    if (head === null) return { room: 0, hold: null };
    if (seen.taken > 0 || head.state === "running") return { room: 0, hold: { limit: "ordered", onFinish: true, until: null } };
    if (head.scheduleTime > now) return { room: 0, hold: { limit: "ordered", onFinish: false, until: head.scheduleTime } };
    // A write of another transaction on the head (a cancel, a change of its
    // priority) commits within moments; the claim does not wait for its lock.
    if (seen.headBusy) return { room: 0, hold: { limit: "ordered", onFinish: false, until: now + BUSY_HEAD_RETRY_MS } };
    room = Math.min(room, 1);
  }
  return { room, hold: null };
}

/** The holds of the groups a claim passed over, as one ClaimHold: the first rule named, woken by whatever frees any of them. */
class HoldSum {
  hold: GroupSelection["hold"] = null;

  add(part: NonNullable<GroupSelection["hold"]>): void {
    if (this.hold === null) {
      this.hold = { ...part };
      return;
    }
    this.hold.onFinish ||= part.onFinish;
    if (part.until !== null) this.hold.until = this.hold.until === null ? part.until : Math.min(this.hold.until, part.until);
  }
}

class GroupReader {
  readonly #seen = new Map<string, SeenGroup>();

  constructor(
    private readonly port: TransactionPort,
    private readonly queue: string,
    private readonly config: QueueConfig,
    private readonly windowStart: number,
  ) {}

  /** Reads, together, the groups of `groupKeys` that a rule bounds and this claim has not read yet (each group once per claim). */
  readAll(groupKeys: readonly string[]): Awaitable<void> {
    const { port, queue, config } = this;
    const wanted = [...new Set(groupKeys)].filter((k) => boundsGroup(config, k) && !this.#seen.has(k));
    if (wanted.length === 0) return;
    const read = {
      runningAtMost: config.groupMaxRunning,
      grantsAfter: config.groupRateLimit > 0 ? this.windowStart : null,
      heads: config.ordered,
    };
    return andThen(port.readGroups(queue, wanted, read), (states) => {
      for (const g of states) {
        const grants = config.groupRateLimit > 0 ? g.grants : NO_GRANTS;
        this.#seen.set(g.groupKey, { running: g.running, grants, head: g.head?.job ?? null, headBusy: g.head?.busy ?? false, taken: 0 });
      }
    });
  }

  /** The group as this claim sees it, once readAll read it; undefined for a job that no group rule bounds. */
  seen(groupKey: string): SeenGroup | undefined {
    if (!boundsGroup(this.config, groupKey)) return undefined;
    const seen = this.#seen.get(groupKey);
    if (seen === undefined) throw new Error(`group ${JSON.stringify(groupKey)} was not read before it was looked at`);
    return seen;
  }
}

/** The groups of the jobs leased, in the order first served (TransactionPort.markGroupsServed), with how many leases each. */
export function servedGroups(jobs: readonly StoredJob[]): Array<{ groupKey: string; leases: number }> {
  const counts = new Map<string, number>();
  for (const job of jobs) counts.set(job.groupKey, (counts.get(job.groupKey) ?? 0) + 1);
  return [...counts].map(([groupKey, leases]) => ({ groupKey, leases }));
}

/**
 * Up to `target` jobs for a claim of a queue with group rules at `now`.
 * `windowStart`: grants after it are in the rate window.
 *
 * Two walks:
 * - fair: over the queue's groups with possibly eligible jobs, least
 *   recently served first (TransactionPort.selectDueGroups: a small table
 *   of groups that the engine keeps), one job per group per round, then
 *   round after round over the groups that still have room. A group held
 *   back is parked until what frees it (a finishing lease, its rate
 *   window, its ordered head's schedule_time), and a group with nothing
 *   eligible until its next pending job is due, so later claims pass
 *   neither. The cost of a claim follows the groups it looks at, not the
 *   jobs queued behind them.
 * - not fair: the usual claim order over the queue, skipping jobs of groups
 *   held back, looking at most MAX_SCANNED jobs; a queue where many jobs of
 *   held groups sit ahead of the rest serves those others only as the
 *   held groups drain (docs/api.md "Groups": fair is the cheaper rule then).
 *
 * Either walk reads the groups it looks at together, a page or a few at a
 * time (TransactionPort.readGroups, selectGroupsClaimable), and sends its
 * parks and settles together: on PostgreSQL a claim's round trips follow
 * the pages it reads, not the groups, while it holds its queue's turn.
 */
export function selectWithGroups(
  port: TransactionPort,
  queue: string,
  config: QueueConfig,
  now: number,
  windowStart: number,
  target: number,
): Awaitable<GroupSelection> {
  const walk: Walk = { port, queue, config, now, target, reader: new GroupReader(port, queue, config, windowStart) };
  return config.fair ? fairWalk(walk) : claimOrderWalk(walk);
}

/** One claim's walk: where, when, how many, and the groups as it reads them. */
interface Walk {
  port: TransactionPort;
  queue: string;
  config: QueueConfig;
  now: number;
  target: number;
  reader: GroupReader;
}

/** Not fair: the claim order, skipping what group rules hold back. */
function claimOrderWalk(walk: Walk): Awaitable<GroupSelection> {
  const { port, queue, config, now, target, reader } = walk;
  const taken: StoredJob[] = [];
  const holds = new HoldSum();
  let looked = 0;
  // Each read starts from the head of the claim order again and skips what an
  // earlier read looked at: a few growing reads, at most MAX_SCANNED jobs.
  let limit = Math.min(MAX_SCANNED, Math.max(4 * target, 32));
  return andThen(
    repeatWhile(() =>
      andThen(port.selectClaimable(queue, now, limit), (page) => {
        const fresh = page.slice(looked);
        return andThen(reader.readAll(fresh.map((j) => j.groupKey)), () => {
          for (const job of fresh) {
            if (taken.length >= target) break;
            const seen = reader.seen(job.groupKey);
            if (seen === undefined) {
              taken.push(job);
              continue;
            }
            const room = groupRoom(config, seen, now);
            if (room.hold !== null) holds.add(room.hold);
            // Under ordered, only the head: the group's other jobs wait behind it.
            if (room.room > 0 && (!config.ordered || seen.head?.id === job.id)) {
              seen.taken++;
              taken.push(job);
            }
          }
          looked = page.length;
          if (taken.length >= target || page.length < limit || limit >= MAX_SCANNED) return false;
          limit = Math.min(MAX_SCANNED, limit * 4);
          return true;
        });
      }),
    ),
    () => ({ jobs: taken, hold: holds.hold }),
  );
}

interface LiveGroup {
  key: string;
  seen: SeenGroup | undefined;
  /** Jobs of the group this claim has taken, by id. */
  takenIds: Set<string>;
}

/** Groups a fair claim reads together, at least (more when it wants more jobs). */
const MIN_GROUPS_READ = 8;

/** Fair: round robin over the groups, least recently served first. */
function fairWalk(walk: Walk): Awaitable<GroupSelection> {
  const { port, queue, config, now, target, reader } = walk;
  const taken: StoredJob[] = [];
  const holds = new HoldSum();
  const live: LiveGroup[] = [];
  let after: DueGroup | null = null;

  /** What one more job of the group may be now; parks or settles a group that has none. */
  const roomOf = (group: LiveGroup): Room =>
    group.seen === undefined ? { room: Infinity, hold: null } : groupRoom(config, group.seen, now);

  const take = (group: LiveGroup, job: StoredJob): void => {
    taken.push(job);
    group.takenIds.add(job.id);
    if (group.seen !== undefined) group.seen.taken++;
  };

  /**
   * One job of each group of `rows`, in their order, until the claim has its
   * target. The groups are read together, and the next job of those with
   * room (unless ordered: that is the head) in one selection; then the
   * groups held back are parked and those without an eligible job settled,
   * all sent together.
   */
  const serveOnce = (rows: readonly DueGroup[]): Awaitable<void> =>
    andThen(reader.readAll(rows.map((r) => r.groupKey)), () => {
      const groups = rows.map((row): LiveGroup => ({ key: row.groupKey, seen: reader.seen(row.groupKey), takenIds: new Set() }));
      // Under ordered a group's next job is its head (jobs without a group have none).
      const headed = (g: LiveGroup) => config.ordered && g.seen !== undefined;
      const wanting = groups.filter((g) => roomOf(g).room > 0 && !headed(g));
      return andThen(
        wanting.length > 0
          ? port.selectGroupsClaimable(
              queue,
              wanting.map((g) => g.key),
              now,
              1,
            )
          : [],
        (lists) => {
          const nextOf = new Map(wanting.map((g, i) => [g, lists[i][0]]));
          const writes: Array<Awaitable<void>> = [];
          groups.forEach((group, i) => {
            if (taken.length >= target) return;
            const row = rows[i];
            after = row;
            const room = roomOf(group);
            if (room.hold !== null) {
              holds.add(room.hold);
              writes.push(port.parkGroup(queue, row, room.hold.onFinish ? null : room.hold.until, room.hold.limit));
              return;
            }
            if (room.room <= 0) {
              writes.push(port.settleGroup(queue, row));
              return;
            }
            const job = headed(group) ? (group.seen!.head ?? undefined) : nextOf.get(group);
            if (job === undefined || job.scheduleTime > now || job.state === "running") {
              writes.push(port.settleGroup(queue, row));
              return;
            }
            take(group, job);
            live.push(group);
          });
          return allAtOnce(writes);
        },
      );
    });

  // The first round: one job from each group in served order, page after
  // page, the groups of a page read a few at a time (about as many as the
  // claim still wants).
  const firstRound = repeatWhile(() =>
    andThen(port.selectDueGroups(queue, now, after, GROUP_PAGE), (rows) => {
      let i = 0;
      return andThen(
        repeatWhile(() => {
          if (i >= rows.length || taken.length >= target) return false;
          const chunk = rows.slice(i, i + Math.max(MIN_GROUPS_READ, target - taken.length));
          i += chunk.length;
          return andThen(serveOnce(chunk), () => true);
        }),
        () => taken.length < target && rows.length === GROUP_PAGE,
      );
    }),
  );

  // Later rounds, while the claim wants more than one job per group: each
  // group with room reads about its share of what is left (in one
  // selection for them all), and the rounds take one job of each in turn.
  const laterRounds = () =>
    repeatWhile(() => {
      if (taken.length >= target) return false;
      const open = live.filter((g) => roomOf(g).room > 0);
      // A group this claim filled to its rule may have more jobs: its claimer
      // waits for what frees the group (without reading whether it has).
      for (const g of live) {
        const { hold } = roomOf(g);
        if (hold !== null) holds.add(hold);
      }
      if (open.length === 0) return false;
      const share = Math.ceil((target - taken.length) / open.length);
      const wants = open.map((group) => Math.min(share, roomOf(group).room));
      const perGroup = Math.max(...open.map((group, i) => group.takenIds.size + wants[i]));
      return andThen(
        port.selectGroupsClaimable(
          queue,
          open.map((g) => g.key),
          now,
          perGroup,
        ),
        (found) => {
          const lists = open.map((group, i) => found[i].filter((j) => !group.takenIds.has(j.id)).slice(0, wants[i]));
          let progressed = false;
          for (let round = 0; taken.length < target; round++) {
            let any = false;
            open.forEach((group, i) => {
              const job = lists[i][round];
              if (job === undefined || taken.length >= target || roomOf(group).room <= 0) return;
              take(group, job);
              any = true;
            });
            if (!any) break;
            progressed = true;
          }
          // A group that gave fewer than its share has no more eligible jobs.
          open.forEach((group, i) => {
            if (lists[i].length === 0) live.splice(live.indexOf(group), 1);
          });
          return progressed;
        },
      );
    });

  // Groups parked by an earlier claim until a lease finishes are not read
  // again: a claim left short still tells its claimer to wait for one, also
  // when the groups it read hold it only until a time (a rate window).
  const parked = () =>
    holds.hold?.onFinish === true || taken.length >= target
      ? undefined
      : andThen(port.heldGroupRule(queue), (limit) => {
          if (limit !== null) holds.add({ limit, onFinish: true, until: null });
        });
  return andThen(firstRound, () => andThen(laterRounds(), () => andThen(parked(), () => ({ jobs: taken, hold: holds.hold }))));
}
