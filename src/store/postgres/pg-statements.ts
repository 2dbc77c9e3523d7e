/** Every statement of the PostgreSQL store for one schema, built once per store. */
import { eventStatements, type EventStatements } from "./event-sql.js";
import { countStatements, type CountStatements } from "./job-counts.js";
import { jobStatements, type JobStatements } from "./job-sql.js";
import { activityStatements, type ActivityStatements } from "./queue-activity-sql.js";
import { queueLimitStatements, type QueueLimitStatements } from "./queue-limit-sql.js";
import { scheduleStatements, type ScheduleStatements } from "./schedule-sql.js";

export interface PgStatements {
  schema: string;
  jobs: JobStatements;
  events: EventStatements;
  counts: CountStatements;
  activity: ActivityStatements;
  schedules: ScheduleStatements;
  limits: QueueLimitStatements;
}

export function pgStatements(schema: string): PgStatements {
  return {
    schema,
    jobs: jobStatements(schema),
    events: eventStatements(schema),
    counts: countStatements(schema),
    activity: activityStatements(schema),
    schedules: scheduleStatements(schema),
    limits: queueLimitStatements(schema),
  };
}
