#!/usr/bin/env node
/**
 * Writes docs/configuration.md from the settings table
 * (src/config/settings.ts, rendered by src/config/settings-text.ts), as
 * compiled into dist/: run after tsc (`npm run docs:config` does both).
 * test/config/settings-text.test.ts fails when the committed file differs from it.
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { configurationDoc } from "../dist/src/config/settings-text.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const target = join(root, "docs/configuration.md");
writeFileSync(target, configurationDoc());
console.log(`wrote ${target}`);
