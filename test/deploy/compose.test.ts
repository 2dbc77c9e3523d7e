/**
 * compose.yaml is a valid Compose file (the Compose specification's JSON
 * schema, vendored in test/fixtures/compose-spec) and runs LeaseQueue
 * hardened: read-only root filesystem, no capabilities, no privilege
 * escalation, a non-root user, the database on a named volume, and a
 * readiness health check whose command really tells ready from not ready.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { posix } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { startTestServer } from "../helpers/server.js";

const file = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const composeText = readFileSync(file("compose.yaml"), "utf8");
const compose = parseYaml(composeText);
const schema = JSON.parse(readFileSync(file("test/fixtures/compose-spec/compose-spec.json"), "utf8"));
const dockerfile = readFileSync(file("Dockerfile"), "utf8");

// strictSchema: a keyword ajv does not know fails loudly instead of being ignored.
// The schema's own style (type unions, `additionalProperties` beside `oneOf`
// without `type`) is valid JSON Schema that ajv's stricter style lints reject.
const ajv = new Ajv2020({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false });
const validateCompose = ajv.compile(schema);

/** Schema errors of a Compose document, as readable lines (empty when valid). */
function composeErrors(doc: unknown): string[] {
  if (validateCompose(doc)) return [];
  return (validateCompose.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
}

const service = compose.services?.leasequeue;

/** The runtime stage's `ENV` settings of the Dockerfile (KEY=value pairs). */
function dockerfileEnv(): Record<string, string> {
  const runtime = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  const env: Record<string, string> = {};
  for (const block of runtime.matchAll(/^ENV ((?:.*\\\n)*.*)$/gm)) {
    for (const m of block[1].matchAll(/([A-Z_]+)=(\S+)/g)) env[m[1]] = m[2];
  }
  return env;
}

/** What the container sees: the Dockerfile's ENV, overridden by compose.yaml's environment. */
const containerEnv: Record<string, string> = { ...dockerfileEnv(), ...(service?.environment ?? {}) };

describe("compose.yaml against the Compose specification", () => {
  it("is valid", () => {
    expect(composeErrors(compose)).toEqual([]);
  });

  it("the validator refuses what Compose would refuse", () => {
    const broken = (edit: (doc: any) => void) => {
      const doc = structuredClone(compose);
      edit(doc);
      return composeErrors(doc);
    };
    expect(broken((d) => (d.services.leasequeue.read_onyl = true))).not.toEqual([]);
    // (The schema takes strings where booleans and numbers go: they may be ${VARIABLES}.)
    expect(broken((d) => (d.services.leasequeue.read_only = ["yes"]))).not.toEqual([]);
    expect(broken((d) => (d.services.leasequeue.cap_drop = "ALL"))).not.toEqual([]);
    expect(broken((d) => (d.services.leasequeue.healthcheck.retries = { times: 3 }))).not.toEqual([]);
    expect(broken((d) => (d.volumes = ["leasequeue-data"]))).not.toEqual([]);
  });
});

describe("compose.yaml hardening", () => {
  it("builds the repository's Dockerfile", () => {
    expect(service.build).toMatchObject({ context: ".", dockerfile: "Dockerfile" });
  });

  it("runs with a read-only root filesystem, no capabilities and no privilege escalation", () => {
    expect(service.read_only).toBe(true);
    expect(service.cap_drop).toEqual(["ALL"]);
    expect(service.cap_add).toBeUndefined();
    expect(service.privileged).toBeUndefined();
    expect(service.security_opt).toContain("no-new-privileges:true");
  });

  it("runs as a non-root user, and so does the image by itself", () => {
    expect(typeof service.user).toBe("string");
    expect(service.user.split(":")[0]).not.toMatch(/^(root|0)$/);
    const users = [...dockerfile.matchAll(/^USER (\S+)$/gm)].map((m) => m[1]);
    expect(users.at(-1)).toBe("node");
  });

  it("keeps the database on a named volume, the only writable mount besides a small /tmp", () => {
    const dbPath = containerEnv.LEASEQUEUE_DATABASE_PATH;
    expect(dbPath).toMatch(/^\//);
    const mounts = service.volumes as { type: string; source: string; target: string }[];
    expect(mounts).toHaveLength(1);
    expect(mounts[0]).toMatchObject({ type: "volume", target: posix.dirname(dbPath) });
    expect(Object.keys(compose.volumes)).toContain(mounts[0].source);
    expect(service.tmpfs).toEqual([expect.stringMatching(/^\/tmp:.*noexec.*size=\d+m/)]);
    // The image creates that directory for the unprivileged user, closed to everyone else.
    const dir = posix.dirname(dbPath);
    expect(dockerfile).toContain(`mkdir -p ${dir} && chown node:node ${dir} && chmod 700 ${dir}`);
  });

  it("runs in production mode with reflection and the API reference off", () => {
    expect(containerEnv.LEASEQUEUE_ENVIRONMENT).toBe("production");
    expect(containerEnv.LEASEQUEUE_REFLECTION).toBe("off");
    expect(containerEnv.LEASEQUEUE_DOCS).toBe("off");
  });

  it("publishes the API port and the side port on the host's loopback only", () => {
    expect(service.ports).toEqual([
      `127.0.0.1:${containerEnv.LEASEQUEUE_PORT}:${containerEnv.LEASEQUEUE_PORT}`,
      `127.0.0.1:${containerEnv.LEASEQUEUE_METRICS_PORT}:${containerEnv.LEASEQUEUE_METRICS_PORT}`,
    ]);
  });

  it("checks readiness on the side port with a command the image has (node, no shell, no curl)", () => {
    const [kind, program, flag, script] = service.healthcheck.test as string[];
    expect([kind, program, flag]).toEqual(["CMD", "node", "-e"]);
    expect(script).toContain("/health/ready");
    expect(script).toContain("process.env.LEASEQUEUE_METRICS_PORT");
    expect(service.healthcheck.disable).toBeUndefined();
  });
});

/** Runs the health check's `node -e` script with the container's metrics port; resolves with its exit code. */
function runHealthcheck(metricsPort: number): Promise<number> {
  const [, program, flag, script] = service.healthcheck.test as string[];
  // The image's `node` is this test's Node.
  const executable = program === "node" ? process.execPath : program;
  return new Promise((resolve, reject) => {
    execFile(
      executable,
      [flag, script],
      { env: { ...process.env, LEASEQUEUE_METRICS_PORT: String(metricsPort) }, timeout: 30_000 },
      (error) => {
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- an ExecFileException is an Error; @types/node builds its type with Omit<>, which the rule cannot see through
        if (error && typeof error.code !== "number") reject(error);
        else resolve(error ? (error.code as number) : 0);
      },
    );
  });
}

describe("the health check command", () => {
  it("passes against a ready server and fails once it is gone", async () => {
    const server = await startTestServer();
    const port = new URL(server.metricsUrl).port;
    try {
      expect(await runHealthcheck(Number(port))).toBe(0);
    } finally {
      await server.close();
    }
    expect(await runHealthcheck(Number(port))).toBe(1);
  }, 60_000);

  it("fails when /health/ready answers 503", async () => {
    const notReady = http.createServer((req, res) => {
      res.writeHead(req.url === "/health/ready" ? 503 : 404, { "content-type": "application/json" });
      res.end('{"status":"not_ready","reason":"disk full"}');
    });
    await new Promise<void>((resolve) => notReady.listen(0, "127.0.0.1", resolve));
    try {
      expect(await runHealthcheck((notReady.address() as AddressInfo).port)).toBe(1);
    } finally {
      await new Promise((resolve) => notReady.close(resolve));
    }
  }, 60_000);
});

describe("deploy/compose/postgres.yaml: several servers on one PostgreSQL", () => {
  // YAML merge keys (<<) as Compose reads them.
  const doc = parseYaml(readFileSync(file("deploy/compose/postgres.yaml"), "utf8"), { merge: true });
  const servers = Object.entries(doc.services as Record<string, any>).filter(([name]) => name.startsWith("leasequeue"));

  it("is valid", () => {
    expect(composeErrors(doc)).toEqual([]);
  });

  it("runs two hardened servers on one database, started once PostgreSQL is healthy", () => {
    expect(servers.map(([name]) => name)).toEqual(["leasequeue-a", "leasequeue-b"]);
    const urls = new Set(servers.map(([, s]) => s.environment.LEASEQUEUE_DATABASE_URL));
    expect(urls.size).toBe(1);
    expect([...urls][0]).toMatch(/^postgres:\/\/leasequeue:\$\{LEASEQUEUE_DB_PASSWORD:-[^}]+\}@postgres:5432\/leasequeue$/);
    for (const [, s] of servers) {
      expect(s).toMatchObject({ user: "node", read_only: true, cap_drop: ["ALL"], security_opt: ["no-new-privileges:true"] });
      expect(s.depends_on).toEqual({ postgres: { condition: "service_healthy" } });
      expect(s.environment.LEASEQUEUE_DATABASE_PATH).toBeUndefined();
      expect(s.healthcheck.test.join(" ")).toContain("/health/ready");
      for (const port of s.ports as string[]) expect(port).toMatch(/^127\.0\.0\.1:/);
    }
    // Distinct host ports, and PostgreSQL is not published at all.
    const published = servers.flatMap(([, s]) => (s.ports as string[]).map((p) => p.split(":")[1]));
    expect(new Set(published).size).toBe(published.length);
    expect(doc.services.postgres.ports).toBeUndefined();
    expect(doc.services.postgres.healthcheck.test).toContain("pg_isready");
  });
});
