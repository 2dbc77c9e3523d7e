import { configDefaults, defineConfig } from "vitest/config";

/**
 * `npm test` runs `vitest run --coverage`: V8 coverage of the server and SDK
 * code the tests run in their own process (tests that spawn `bin/leasequeue.js`
 * exercise dist/, which is not counted). The thresholds are a floor just
 * under what the suite reaches, so coverage can only rise; raise them when it
 * does. A single file (`npx vitest run test/x.test.ts`) runs without coverage.
 *
 * Three projects: every test on the default engine (SQLite); the service
 * tests again with their servers on PostgreSQL (test/helpers/server.ts
 * reads LEASEQUEUE_TEST_ENGINE); and the service tests once more with the
 * servers on connect-es's and protobuf-es's own wire paths
 * (LEASEQUEUE_WIRE=library, read from LEASEQUEUE_TEST_WIRE), so that every
 * answer is checked both ways (docs/performance.md "The fast wire"). The
 * store contract runs on both engines in the first (test/store/).
 * `--project sqlite`, `postgres` or `library` picks one.
 */
export default defineConfig({
  test: {
    // A test waits on events (docs/development.md "How a test waits"); its
    // time limit only bounds a hang, far beyond any machine's pace, so a
    // loaded machine never fails a test that would pass on a quiet one.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests live under test/ only; compiled copies (a `tsc` without --noEmit writes them to dist/test) are never run.
    exclude: [...configDefaults.exclude, "dist/**"],
    coverage: {
      provider: "v8",
      include: ["src/**/*.ts"],
      // The console and the API reference page run in the browser (bundled by esbuild), not in vitest's process.
      exclude: ["src/console/**", "src/docs/**"],
      reporter: ["text-summary", "json-summary"],
      reportsDirectory: "test-artifacts/coverage",
      thresholds: { lines: 84, branches: 77 },
    },
    projects: [
      { extends: true, test: { name: "sqlite" } },
      {
        extends: true,
        test: { name: "postgres", include: ["test/service/**/*.test.ts"], env: { LEASEQUEUE_TEST_ENGINE: "postgres" } },
      },
      {
        extends: true,
        test: { name: "library", include: ["test/service/**/*.test.ts"], env: { LEASEQUEUE_TEST_WIRE: "library" } },
      },
    ],
  },
});
