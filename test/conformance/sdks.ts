/**
 * The three SDKs the conformance suite runs, each through its driver
 * (drivers/): how to tell whether its toolchain is here, and how to build
 * it. Under CI=true a missing toolchain fails the suite (external/tools.ts).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { GO_TOOLS, goAvailable, goBuild, goWorkspace, installPythonSdk, PYTHON_TOOLS, pythonAvailable } from "../external/sdk-builds.js";
import { REPO_ROOT } from "../external/tools.js";
import type { DriverCommand } from "./driver.js";

export interface Sdk {
  name: "typescript" | "python" | "go";
  available: boolean;
  /** What to install when `available` is false. */
  tools: string;
  /** Builds the SDK and its driver; returns how to start the driver. */
  prepare(): Promise<DriverCommand>;
}

const DRIVERS = join(REPO_ROOT, "test/conformance/drivers");
const TS_SDK = join(REPO_ROOT, "dist/src/worker/index.js");

export const SDKS: Sdk[] = [
  {
    name: "typescript",
    available: existsSync(TS_SDK),
    tools: "dist/ (npm run build)",
    prepare: () => Promise.resolve({ file: process.execPath, args: [join(DRIVERS, "ts-driver.mjs")] }),
  },
  {
    name: "python",
    available: pythonAvailable,
    tools: PYTHON_TOOLS,
    prepare: async () => ({ file: await installPythonSdk(), args: [join(DRIVERS, "python_driver.py")] }),
  },
  {
    name: "go",
    available: goAvailable,
    tools: GO_TOOLS,
    prepare: async () => ({ file: await goBuild(goWorkspace(), "leasequeue/test/conformance/drivers/go-driver", "go-driver"), args: [] }),
  },
];
