#!/usr/bin/env node
/**
 * Writes test/fixtures/kubernetes/definitions.json: the definitions of
 * Kubernetes' OpenAPI document (api/openapi-spec/swagger.json of a release)
 * that the manifests of deploy/kubernetes/ use, with every definition they
 * reference, copied unchanged. test/deploy/kubernetes.test.ts validates the
 * manifests against them; test/fixtures/kubernetes/README.md says where the
 * document came from.
 *
 *   node scripts/vendor-kubernetes-definitions.mjs <swagger.json>
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The kinds of deploy/kubernetes/. */
const ROOTS = ["io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.Service"];

const [source] = process.argv.slice(2);
if (source === undefined) {
  console.error("usage: node scripts/vendor-kubernetes-definitions.mjs <swagger.json>");
  process.exit(2);
}
const { definitions } = JSON.parse(readFileSync(source, "utf8"));

const kept = new Set();
const visit = (name) => {
  if (kept.has(name)) return;
  if (definitions[name] === undefined) throw new Error(`${source} has no definition ${name}`);
  kept.add(name);
  for (const ref of JSON.stringify(definitions[name]).matchAll(/"\$ref":"#\/definitions\/([^"]+)"/g)) visit(ref[1]);
};
ROOTS.forEach(visit);

const out = { definitions: Object.fromEntries([...kept].sort().map((name) => [name, definitions[name]])) };
const target = join(dirname(fileURLToPath(import.meta.url)), "../test/fixtures/kubernetes/definitions.json");
writeFileSync(target, JSON.stringify(out, null, 2) + "\n");
console.log(`wrote ${kept.size} definitions to ${target}`);
