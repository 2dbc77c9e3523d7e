/**
 * deploy/kubernetes/ is what Kubernetes and KEDA accept: every document is
 * valid against the published schema of its kind (Kubernetes' OpenAPI
 * definitions in test/fixtures/kubernetes, KEDA's CRDs in test/fixtures/keda),
 * checked as strictly as `kubectl apply` checks it (unknown fields are
 * refused); and the manifests fit together and fit the server: the
 * ScaledObject's trigger is metadata the scaler accepts, it scales the worker
 * Deployment, reaches the Service's API port and names a variable of the
 * worker's container for its token; the Service selects the server's pods,
 * whose probes ask the side port's health paths. The TriggerAuthentication
 * that docs/operations.md "Autoscaling workers" shows is checked against its
 * CRD too.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { scalerSpec } from "../../src/service/scaler-metadata.js";
import { PACKAGE_ROOT } from "../helpers/process.js";

const file = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

interface Manifest {
  file: string;
  doc: any;
}

const manifestFiles = readdirSync(file("deploy/kubernetes"))
  .filter((f) => f.endsWith(".yaml"))
  .sort();
const manifests: Manifest[] = manifestFiles.flatMap((f) =>
  parseAllDocuments(readFileSync(file(`deploy/kubernetes/${f}`), "utf8")).map((d) => {
    expect(d.errors, f).toEqual([]);
    return { file: f, doc: d.toJS() };
  }),
);

type Schema = Record<string, any>;

/** The annotations of Kubernetes' schemas (list and map semantics, CEL rules the API server evaluates): accepted, not checked here. */
const KUBERNETES_KEYWORDS = [
  "x-kubernetes-group-version-kind",
  "x-kubernetes-int-or-string",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-list-type",
  "x-kubernetes-map-type",
  "x-kubernetes-patch-merge-key",
  "x-kubernetes-patch-strategy",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-unions",
  "x-kubernetes-validations",
];

/**
 * A schema as the API server applies it to `kubectl apply` (field
 * validation `Strict`, kubectl's default): every object that lists its
 * properties refuses others, unless it preserves unknown fields. The
 * OpenAPI v2 document types IntOrString and Quantity as strings, though
 * both also take numbers (`port: 8080`, `cpu: 1`).
 */
function asApplied(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(asApplied);
  if (schema === null || typeof schema !== "object") return schema;
  const s: Schema = Object.fromEntries(
    Object.entries(schema as Schema).map(([k, v]) => [k, k === "properties" ? mapValues(v as Schema, asApplied) : asApplied(v)]),
  );
  if (s.format === "int-or-string" || s["x-kubernetes-int-or-string"] === true) {
    delete s.type;
    delete s.format;
    if (s.anyOf === undefined) s.anyOf = [{ type: "integer" }, { type: "string" }];
  }
  if (s.properties !== undefined && s.additionalProperties === undefined && s["x-kubernetes-preserve-unknown-fields"] !== true) {
    s.additionalProperties = false;
  }
  return s;
}

function mapValues(o: Record<string, unknown>, f: (v: unknown) => unknown): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));
}

// strictSchema: a keyword ajv does not know fails loudly instead of being ignored.
// Formats (int32, date-time, ...) are not checked; types and patterns are.
const ajv = new Ajv({
  allErrors: true,
  strictSchema: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  validateFormats: false,
});
for (const keyword of KUBERNETES_KEYWORDS) ajv.addKeyword(keyword);

const K8S_ID = "https://kubernetes.io/openapi/definitions.json";
const k8s = JSON.parse(readFileSync(file("test/fixtures/kubernetes/definitions.json"), "utf8")) as { definitions: Record<string, Schema> };
const quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity";
ajv.addSchema({
  $id: K8S_ID,
  definitions: {
    ...mapValues(k8s.definitions, asApplied),
    [quantity]: { description: k8s.definitions[quantity].description, anyOf: [{ type: "string" }, { type: "number" }] },
  },
});

/** apiVersion/kind -> the validator of that kind. */
const validators = new Map<string, ValidateFunction>();
for (const [name, def] of Object.entries(k8s.definitions)) {
  for (const gvk of (def["x-kubernetes-group-version-kind"] ?? []) as Array<{ group: string; version: string; kind: string }>) {
    const apiVersion = gvk.group === "" ? gvk.version : `${gvk.group}/${gvk.version}`;
    validators.set(`${apiVersion}/${gvk.kind}`, ajv.getSchema(`${K8S_ID}#/definitions/${name}`)!);
  }
}
for (const crd of ["keda.sh_scaledobjects.yaml", "keda.sh_triggerauthentications.yaml"]) {
  const { spec } = parseYaml(readFileSync(file(`test/fixtures/keda/${crd}`), "utf8"));
  for (const version of spec.versions) {
    validators.set(`${spec.group}/${version.name}/${spec.names.kind}`, ajv.compile(asApplied(version.schema.openAPIV3Schema) as Schema));
  }
}

/** Schema errors of a document, as readable lines (empty when valid); throws for a kind without a vendored schema. */
function schemaErrors(doc: any): string[] {
  const validate = validators.get(`${doc.apiVersion}/${doc.kind}`);
  if (validate === undefined) throw new Error(`no schema of ${doc.apiVersion} ${doc.kind} is vendored in test/fixtures`);
  if (validate(doc)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
}

function only(kind: string, name?: string): any {
  const found = manifests.filter((m) => m.doc.kind === kind && (name === undefined || m.doc.metadata.name === name));
  expect(found, `${kind} ${name ?? ""}`).toHaveLength(1);
  return found[0].doc;
}

describe("deploy/kubernetes against the published schemas", () => {
  it("holds the server, its Service, the workers and their ScaledObject", () => {
    expect(manifests.map((m) => `${m.file}: ${m.doc.kind} ${m.doc.metadata.name}`)).toEqual([
      "namespace.yaml: Namespace jobs",
      "scaledobject.yaml: ScaledObject billing-worker",
      "server.yaml: Deployment leasequeue",
      "server.yaml: Service leasequeue",
      "worker.yaml: Deployment billing-worker",
    ]);
  });

  it.each(manifests.map((m) => [`${m.file}: ${m.doc.kind} ${m.doc.metadata.name}`, m.doc]))("%s is valid", (_name, doc) => {
    expect(schemaErrors(doc)).toEqual([]);
  });

  it("the validators refuse what the API server would refuse", () => {
    const broken = (kind: string, edit: (doc: any) => void) => {
      const doc = structuredClone(manifests.find((m) => m.doc.kind === kind)!.doc);
      edit(doc);
      return schemaErrors(doc);
    };
    expect(broken("Deployment", (d) => (d.spec.template.spec.contianers = d.spec.template.spec.containers))).not.toEqual([]);
    expect(broken("Deployment", (d) => delete d.spec.selector)).not.toEqual([]);
    expect(broken("Deployment", (d) => (d.spec.replicas = "2"))).not.toEqual([]);
    expect(broken("Deployment", (d) => (d.spec.template.spec.containers[0].ports = [{ containerPort: "api" }]))).not.toEqual([]);
    expect(broken("Service", (d) => (d.spec.ports[0].targetPort = 8080))).toEqual([]);
    expect(broken("Service", (d) => (d.spec.ports[0].targetPort = true))).not.toEqual([]);
    expect(broken("ScaledObject", (d) => (d.spec.triggers[0].metadata.targetPendingPerReplica = 10))).not.toEqual([]);
    expect(broken("ScaledObject", (d) => (d.spec.triggers[0].authRef = { name: "x" }))).not.toEqual([]);
    expect(broken("ScaledObject", (d) => delete d.spec.scaleTargetRef)).not.toEqual([]);
    expect(() => broken("ScaledObject", (d) => (d.apiVersion = "keda.sh/v1"))).toThrow(/no schema of keda.sh\/v1 ScaledObject/);
  });
});

describe("deploy/kubernetes fits together", () => {
  const server = only("Deployment", "leasequeue");
  const service = only("Service", "leasequeue");
  const worker = only("Deployment", "billing-worker");
  const scaledObject = only("ScaledObject");
  const namespace = only("Namespace").metadata.name;

  it("puts everything in one namespace", () => {
    for (const { file: f, doc } of manifests.filter((m) => m.doc.kind !== "Namespace")) expect(doc.metadata.namespace, f).toBe(namespace);
  });

  it("selects the server's pods in its Service and probes the side port's health paths", () => {
    expect(server.spec.template.metadata.labels).toMatchObject(service.spec.selector);
    const container = server.spec.template.spec.containers[0];
    const portNames = container.ports.map((p: { name: string }) => p.name);
    for (const port of service.spec.ports) expect(portNames).toContain(port.targetPort);
    expect(container.ports).toContainEqual({ name: "metrics", containerPort: 9464 });
    expect(container.livenessProbe.httpGet).toEqual({ path: "/health/live", port: "metrics" });
    expect(container.readinessProbe.httpGet).toEqual({ path: "/health/ready", port: "metrics" });
    expect(container.args).toEqual(["serve"]);
  });

  it("leaves the worker's replicas to KEDA", () => {
    expect(worker.spec.replicas).toBeUndefined();
    expect(scaledObject.spec.scaleTargetRef).toEqual({ name: worker.metadata.name });
  });

  it("gives KEDA metadata the scaler accepts, its Service's API port, and a token variable of the worker's container", () => {
    const [trigger] = scaledObject.spec.triggers;
    expect(trigger.type).toBe("external-push");
    const metadata = trigger.metadata as Record<string, string>;
    expect(scalerSpec(metadata, "scalerMetadata")).toEqual({ queue: "billing", targetPendingPerReplica: 10, includeRunning: true });
    const apiPort = service.spec.ports.find((p: { name: string }) => p.name === "api").port;
    // KEDA's operator runs in its own namespace: the address names the Service in full.
    expect(metadata.scalerAddress).toBe(`${service.metadata.name}.${namespace}.svc.cluster.local:${apiPort}`);
    // KEDA resolves *FromEnv keys from the scale target's first container (no envSourceContainerName is set).
    expect(scaledObject.spec.scaleTargetRef.envSourceContainerName).toBeUndefined();
    const env = worker.spec.template.spec.containers[0].env as Array<{ name: string; valueFrom?: { secretKeyRef?: unknown } }>;
    expect(env.find((e) => e.name === metadata.tokenFromEnv)?.valueFrom?.secretKeyRef).toBeDefined();
    expect(worker.spec.template.spec.containers[0].env).toContainEqual({ name: "LEASEQUEUE_QUEUE", value: metadata.queue });
  });
});

describe('docs/operations.md "Autoscaling workers"', () => {
  const operations = readFileSync(`${PACKAGE_ROOT}/docs/operations.md`, "utf8");
  const section = operations.slice(
    operations.indexOf("## Autoscaling workers"),
    operations.indexOf("\n## ", operations.indexOf("## Autoscaling workers") + 1),
  );
  const yamlBlocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => parseAllDocuments(m[1]).map((d) => d.toJS()));

  it("shows a TriggerAuthentication and a trigger that KEDA's CRDs accept", () => {
    const docs = yamlBlocks.flat();
    const kinds = docs.map((d) => d.kind);
    expect(kinds).toContain("TriggerAuthentication");
    expect(kinds).toContain("ScaledObject");
    for (const doc of docs) expect(schemaErrors(doc), `${doc.kind} ${doc.metadata?.name}`).toEqual([]);
  });
});
