import { v7 as uuidv7 } from "uuid";

/** Job ids are UUIDv7: unique, and ordered by creation time (ListJobs sorts by id). */
export function newJobId(): string {
  return uuidv7();
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Any well-formed UUID (lower case, as we emit them); other ids are refused before the store is asked. */
export function isJobId(value: string): boolean {
  return UUID.test(value);
}
