import { defineConfig } from "vitest/config";

/**
 * `npm test` runs `vitest run --coverage`: V8 coverage of the server and SDK
 * code the tests run in their own process (tests that spawn `bin/leasequeue.js`
 * exercise dist/, which is not counted). The thresholds are a floor just
 * under what the suite reaches, so coverage can only rise; raise them when it
 * does. A single file (`npx vitest run test/x.test.ts`) runs without coverage.
 */
export default defineConfig({
  test: {
    coverage: {
      provider: "v8",
      include: ["src/**/*.ts"],
      // The console and the API reference page run in the browser (bundled by esbuild), not in vitest's process.
      exclude: ["src/console/**", "src/docs/**"],
      reporter: ["text-summary", "json-summary"],
      reportsDirectory: "test-artifacts/coverage",
      thresholds: { lines: 83, branches: 76 },
    },
  },
});
