/**
 * The worker examples are short programs on the SDKs (examples/*): at most
 * 20 lines of code each. What counts is what a reader writes: blank lines,
 * comments and docstrings, the package clause and the imports do not.
 * test/external/python-sdk.test.ts and go-sdk.test.ts run them.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "../helpers/process.js";

/** The lines of code of a Go or Python file: not blank, not a comment or docstring, not `package` or an import. */
function codeLines(source: string, language: "go" | "python"): string[] {
  const text =
    language === "go"
      ? source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^import \([\s\S]*?^\)/m, "")
      : source.replace(/^\s*("""|''')[\s\S]*?\1/gm, "");
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith(language === "go" ? "//" : "#"))
    .filter((line) => !(language === "go" ? /^(package|import)\s/ : /^(import|from)\s/).test(line));
}

describe("the worker examples", () => {
  it.each([
    ["examples/go-worker/main.go", "go"],
    ["examples/python-worker/worker.py", "python"],
    ["examples/python-worker/producer.py", "python"],
  ] as const)("%s is at most 20 lines of code", (file, language) => {
    const lines = codeLines(readFileSync(join(PACKAGE_ROOT, file), "utf8"), language);
    expect(lines.length, lines.join("\n")).toBeLessThanOrEqual(20);
  });

  it("counts code, not the header, the imports or blank lines", () => {
    const go = '// Command x.\npackage main\n\nimport (\n\t"os"\n)\n\nfunc main() {\n\tos.Exit(0) // done\n}\n';
    expect(codeLines(go, "go")).toEqual(["func main() {", "os.Exit(0) // done", "}"]);
    const python = '"""A worker."""\n\nimport os\nfrom x import y\n\n\n# run\nprint(os.name)\n';
    expect(codeLines(python, "python")).toEqual(["print(os.name)"]);
  });
});
