// @ts-check
// ESLint flat config: @eslint/js recommended plus typescript-eslint's type-aware
// recommended rules for src/, test/, bench/ and scripts/. Formatting is Prettier's
// job (.prettierrc.json); none of these presets contains formatting rules, so
// eslint-config-prettier is not needed.
import js from "@eslint/js";
import globals from "globals";
import prettier from "eslint-config-prettier";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["dist/**", "gen/**", "node_modules/**", "test-artifacts/**", "coverage/**", "examples/**", "bench/results/**"],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      // The project service finds each file's nearest tsconfig.json: the root one for
      // the server, tests, bench and scripts (allowJs brings the .mjs files in), and
      // src/console/tsconfig.json and src/docs/tsconfig.json for the browser bundles (Preact JSX).
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // The promise rules are the reason for a type-aware linter in a promise-heavy server;
      // they are in recommendedTypeChecked already and are spelled out here so that
      // nobody turns them off by accident.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/require-await": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          args: "after-used",
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrorsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    files: ["src/console/**", "src/docs/**"],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // Tests read untyped JSON off the wire (okJson(), connect JSON bodies, metrics text)
    // and poke at it field by field; that JSON is deliberately `any` there, because the
    // assertions themselves are the type check. The rules about `any` would only ask
    // for a cast at every assertion, so they are off for test/ (and nowhere in src/).
    files: ["test/**"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  {
    // The bench and the build scripts are plain JavaScript (tsconfig.json has checkJs off):
    // every parameter is an implicit `any`, so the rules about `any` values say nothing
    // there. The promise rules (no-floating-promises and the rest) stay on.
    files: ["**/*.mjs", "**/*.js"],
    rules: {
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  // Last: turns off the few core rules that disagree with Prettier's layout
  // (no-unexpected-multiline, for one); Prettier owns formatting.
  prettier,
);
