/**
 * The PostgreSQL store runs the store contract (test/store/contract/)
 * unchanged, each test on a fresh schema of its own, with a second store
 * instance on the same schema for the cross-instance cases.
 */
import type { PgStore } from "../../../src/store/postgres/pg-store.js";
import {
  dropSchema,
  openTestPgStore,
  probePostgres,
  requirePostgres,
  skipWithoutPostgres,
  uniqueSchemaName,
} from "../../helpers/postgres.js";
import { describeClockSkewContract, describeStoreContract } from "../contract/index.js";
import type { Clock } from "../../../src/domain/clock.js";
import { describe, it } from "vitest";

const probe = await probePostgres();

if (skipWithoutPostgres(probe)) {
  describe.skip("Store contract: postgres (PostgreSQL unreachable)", () => it("needs PostgreSQL", () => {}));
} else {
  describeStoreContract("postgres", async (clock) => {
    requirePostgres(probe);
    const schema = uniqueSchemaName("contract");
    const open = (migrate: boolean) => openTestPgStore(schema, clock, { migrate });
    const stores: PgStore[] = [await open(true)];
    await stores[0].whenListening();
    return {
      store: stores[0],
      async openInstance() {
        const store = await open(false);
        await store.whenListening();
        stores.push(store);
        return store;
      },
      async dispose() {
        for (const store of stores) await store.close();
        await dropSchema(schema);
      },
    };
  });

  describeClockSkewContract("postgres", async (databaseClock) => {
    requirePostgres(probe);
    const schema = uniqueSchemaName("clock");
    const open = (host: Clock, migrate: boolean) => openTestPgStore(schema, host, { databaseClock, migrate });
    const stores: PgStore[] = [await open(databaseClock, true)];
    return {
      store: stores[0],
      async openInstance(host) {
        const store = await open(host, false);
        stores.push(store);
        return store;
      },
      async dispose() {
        for (const store of stores) await store.close();
        await dropSchema(schema);
      },
    };
  });
}
