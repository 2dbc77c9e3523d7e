/**
 * Who may call which RPC of leasequeue.v1 when authentication is on
 * (SECURITY.md "Authentication", the role column of docs/api.md "RPCs"):
 * every RPC needs exactly one role, and a token holds any set of roles. Roles
 * do not imply each other: the console of an operator needs `operator` and
 * `reader`.
 *
 * The table names RPCs as the wire does (the method names of
 * LeaseQueueService). An RPC that is missing here is refused to every token
 * (the edge fails closed), and a test walks the service descriptor so that
 * a new RPC without a role fails the build instead.
 */
export const ROLES = ["producer", "worker", "operator", "reader"] as const;

export type Role = (typeof ROLES)[number];

export const RPC_ROLES: Readonly<Record<string, Role>> = Object.freeze({
  Submit: "producer",
  SubmitBatch: "producer",

  Claim: "worker",
  StreamClaims: "worker",
  Work: "worker",
  Heartbeat: "worker",
  Complete: "worker",
  Fail: "worker",
  Release: "worker",
  Snooze: "worker",
  Acknowledge: "worker",

  Redrive: "operator",
  RedriveAll: "operator",
  Cancel: "operator",
  PauseQueue: "operator",
  ResumeQueue: "operator",
  PurgeQueue: "operator",
  CreateSchedule: "operator",
  DeleteSchedule: "operator",
  UpdateQueue: "operator",

  GetJob: "reader",
  WaitJob: "reader",
  ListJobs: "reader",
  ListJobEvents: "reader",
  GetStats: "reader",
  WatchEvents: "reader",
  ListSchedules: "reader",
  ListGroups: "reader",
  GetQueueActivity: "reader",
});

/**
 * Every RPC of externalscaler.ExternalScaler (KEDA's scaler protocol,
 * docs/operations.md "Autoscaling workers") needs this role: it reads queue
 * counts and nothing else.
 */
export const SCALER_ROLE: Role = "reader";

export function isRole(value: unknown): value is Role {
  return typeof value === "string" && (ROLES as readonly string[]).includes(value);
}
