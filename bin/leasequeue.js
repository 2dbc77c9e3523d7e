#!/usr/bin/env node
// The `leasequeue` command. The TypeScript sources are compiled to dist/ by
// `npm ci` (the package's prepare script) and by `npm start`.
import { main } from "../dist/src/cli.js";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
