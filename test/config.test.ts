import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, redactDatabaseUrl, resolveConfig, SETTINGS, type Setting } from "../src/config/config.js";
import { ServerReflection } from "../gen/ts/grpc/reflection/v1/reflection_pb.js";
import { startTestServer } from "./helpers/server.js";
import { streamOf } from "./helpers/stream-of.js";

describe("configuration", () => {
  it("uses the defaults of docs/configuration.md", () => {
    expect(resolveConfig({}, {})).toMatchObject({
      databasePath: "leasequeue.db",
      host: "127.0.0.1",
      port: 8080,
      metricsHost: "127.0.0.1",
      metricsPort: 9464,
      environment: "development",
      maxRequestBytes: 131072,
      reflection: true,
      docs: true,
      sqliteSynchronous: "full",
      tls: undefined,
    });
  });

  it("reads every setting from the environment, and a flag wins over it", () => {
    const env = {
      LEASEQUEUE_DATABASE_PATH: "/data/q.db",
      LEASEQUEUE_HOST: "0.0.0.0",
      LEASEQUEUE_PORT: "9000",
      LEASEQUEUE_METRICS_PORT: "9001",
      LEASEQUEUE_ENVIRONMENT: "production",
      LEASEQUEUE_MAX_REQUEST_BYTES: "4096",
    };
    expect(resolveConfig({}, env)).toMatchObject({
      databasePath: "/data/q.db",
      host: "0.0.0.0",
      metricsHost: "0.0.0.0",
      port: 9000,
      metricsPort: 9001,
      environment: "production",
      maxRequestBytes: 4096,
    });
    expect(resolveConfig({ port: "7000", "metrics-host": "127.0.0.2" }, env)).toMatchObject({ port: 7000, metricsHost: "127.0.0.2" });
  });

  it("turns reflection off in production unless LEASEQUEUE_REFLECTION=on", () => {
    expect(resolveConfig({}, { LEASEQUEUE_ENVIRONMENT: "production" }).reflection).toBe(false);
    expect(resolveConfig({}, { LEASEQUEUE_ENVIRONMENT: "production", LEASEQUEUE_REFLECTION: "on" }).reflection).toBe(true);
    expect(resolveConfig({ reflection: "off" }, {}).reflection).toBe(false);
  });

  it("turns the API reference at /docs off in production unless LEASEQUEUE_DOCS=on", () => {
    expect(resolveConfig({}, { LEASEQUEUE_ENVIRONMENT: "production" }).docs).toBe(false);
    expect(resolveConfig({}, { LEASEQUEUE_ENVIRONMENT: "production", LEASEQUEUE_DOCS: "on" }).docs).toBe(true);
    expect(resolveConfig({ docs: "off" }, {}).docs).toBe(false);
    // Independent of reflection.
    expect(resolveConfig({ reflection: "off" }, {}).docs).toBe(true);
  });

  it("refuses bad values, naming the setting", () => {
    const cases: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
      [{ port: "abc" }, {}, /--port/],
      [{}, { LEASEQUEUE_PORT: "70000" }, /LEASEQUEUE_PORT/],
      [{}, { LEASEQUEUE_ENVIRONMENT: "staging" }, /LEASEQUEUE_ENVIRONMENT/],
      [{ "max-request-bytes": "12" }, {}, /--max-request-bytes/],
      [{ reflection: "maybe" }, {}, /--reflection/],
      [{}, { LEASEQUEUE_DOCS: "yes" }, /LEASEQUEUE_DOCS/],
      [{ "tls-cert": "/nonexistent.pem" }, {}, /--tls-cert and --tls-key/],
      [{ "tls-cert": "/nonexistent.pem", "tls-key": "/nonexistent.key" }, {}, /cannot read TLS certificate/],
    ];
    for (const [flags, env, message] of cases) {
      expect(() => resolveConfig(flags, env)).toThrow(ConfigError);
      expect(() => resolveConfig(flags, env)).toThrow(message);
    }
  });

  it("defaults the transport limits: gzip only, 256 HTTP/2 streams, HTTP/1.1's timeouts", () => {
    expect(resolveConfig({}, {})).toMatchObject({
      requestCompression: ["gzip"],
      responseCompression: false,
      http2MaxConcurrentStreams: 256,
      requestHeadersTimeoutMs: 30_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 65_000,
    });
  });

  it("reads the transport limits from flags and the environment", () => {
    const env = {
      LEASEQUEUE_REQUEST_COMPRESSION: "gzip,br",
      LEASEQUEUE_RESPONSE_COMPRESSION: "off",
      LEASEQUEUE_HTTP2_MAX_CONCURRENT_STREAMS: "64",
      LEASEQUEUE_REQUEST_HEADERS_TIMEOUT_MS: "1000",
      LEASEQUEUE_REQUEST_TIMEOUT_MS: "2000",
      LEASEQUEUE_KEEPALIVE_TIMEOUT_MS: "3000",
    };
    expect(resolveConfig({}, env)).toMatchObject({
      requestCompression: ["gzip", "br"],
      responseCompression: false,
      http2MaxConcurrentStreams: 64,
      requestHeadersTimeoutMs: 1000,
      requestTimeoutMs: 2000,
      keepAliveTimeoutMs: 3000,
    });
    expect(resolveConfig({ "request-compression": "none" }, env).requestCompression).toEqual([]);
  });

  it("refuses bad transport limits, naming the setting", () => {
    const cases: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
      [{ "request-compression": "deflate" }, {}, /--request-compression/],
      [{}, { LEASEQUEUE_REQUEST_COMPRESSION: "gzip,gzip" }, /LEASEQUEUE_REQUEST_COMPRESSION/],
      [{ "response-compression": "maybe" }, {}, /--response-compression/],
      [{ "http2-max-concurrent-streams": "0" }, {}, /--http2-max-concurrent-streams/],
      [{}, { LEASEQUEUE_HTTP2_MAX_CONCURRENT_STREAMS: "4294967295" }, /LEASEQUEUE_HTTP2_MAX_CONCURRENT_STREAMS/],
      [{ "request-timeout-ms": "abc" }, {}, /--request-timeout-ms/],
      [{ "keepalive-timeout-ms": "5" }, {}, /--keepalive-timeout-ms/],
      [{ "request-headers-timeout-ms": "5000", "request-timeout-ms": "1000" }, {}, /must not exceed --request-timeout-ms/],
    ];
    for (const [flags, env, message] of cases) {
      expect(() => resolveConfig(flags, env)).toThrow(ConfigError);
      expect(() => resolveConfig(flags, env)).toThrow(message);
    }
  });

  it("leaves authentication off unless LEASEQUEUE_AUTH_FILE (--auth-file) names a file", () => {
    expect(resolveConfig({}, {}).authFile).toBeUndefined();
    expect(resolveConfig({}, { LEASEQUEUE_AUTH_FILE: "" }).authFile).toBeUndefined();
    expect(resolveConfig({}, { LEASEQUEUE_AUTH_FILE: "/etc/leasequeue/auth.json" }).authFile).toBe("/etc/leasequeue/auth.json");
    expect(resolveConfig({ "auth-file": "auth.json" }, { LEASEQUEUE_AUTH_FILE: "/etc/x.json" }).authFile).toBe("auth.json");
  });

  it("accepts exactly the numeric bounds that --help and docs/configuration.md state", () => {
    // Settings that are read only with PostgreSQL, and a request timeout the headers timeout may reach.
    const base = { "database-url": "postgres://db/test", "request-headers-timeout-ms": "100", "request-timeout-ms": "3600000" };
    const bounded = (Object.values(SETTINGS) as Setting[]).flatMap((s) => {
      const m = /^(?:0 \(none\) or )?(\d+)-(\d+)(?: ms| bytes)?$/.exec(s.value.accepts ?? "");
      return m === null ? [] : [{ s, min: Number(m[1]), max: Number(m[2]) }];
    });
    expect(bounded.map(({ s }) => s.flag)).toEqual(
      expect.arrayContaining(["port", "database-statement-timeout-ms", "watch-max-pending-bytes"]),
    );
    for (const { s, min, max } of bounded) {
      for (const ok of [min, max]) expect(() => resolveConfig({ ...base, [s.flag]: String(ok) }, {}), `--${s.flag} ${ok}`).not.toThrow();
      for (const bad of [min - 1, max + 1].filter((n) => n >= 0)) {
        expect(() => resolveConfig({ ...base, [s.flag]: String(bad) }, {}), `--${s.flag} ${bad}`).toThrow(`--${s.flag}`);
      }
    }
  });

  it("bounds WatchEvents: most watchers and unread bytes per watcher, from the environment or a flag", () => {
    expect(resolveConfig({}, {})).toMatchObject({ maxWatchers: 1000, watchMaxPendingBytes: 1_048_576 });
    const env = { LEASEQUEUE_MAX_WATCHERS: "50", LEASEQUEUE_WATCH_MAX_PENDING_BYTES: "65536" };
    expect(resolveConfig({}, env)).toMatchObject({ maxWatchers: 50, watchMaxPendingBytes: 65_536 });
    expect(resolveConfig({ "max-watchers": "7" }, env).maxWatchers).toBe(7);
    for (const [flags, message] of [
      [{ "max-watchers": "0" }, /--max-watchers must be a number from 1 to 100000, got "0"/],
      [{ "max-watchers": "many" }, /--max-watchers/],
      [{ "watch-max-pending-bytes": "1024" }, /--watch-max-pending-bytes must be a byte count from 65536/],
    ] as const) {
      expect(() => resolveConfig(flags, {})).toThrow(message);
    }
  });

  it("keeps finished jobs 168h and dead jobs forever by default; reads both retentions as durations", () => {
    expect(resolveConfig({}, {}).retention).toEqual({ retentionMs: 168 * 3_600_000, deadRetentionMs: null });
    const env = { LEASEQUEUE_RETENTION: "30d", LEASEQUEUE_DEAD_RETENTION: "1h30m" };
    expect(resolveConfig({}, env).retention).toEqual({ retentionMs: 30 * 86_400_000, deadRetentionMs: 90 * 60_000 });
    expect(resolveConfig({ retention: "0s", "dead-retention": "500ms" }, env).retention).toEqual({ retentionMs: 0, deadRetentionMs: 500 });
    expect(resolveConfig({ retention: "1.5h" }, {}).retention.retentionMs).toBe(5_400_000);
    for (const [flags, environment, message] of [
      [{ retention: "7 days" }, {}, /--retention "7 days" is not a duration/],
      [{ retention: "-1h" }, {}, /--retention "-1h" is not a duration/],
      [{}, { LEASEQUEUE_RETENTION: "168" }, /LEASEQUEUE_RETENTION "168" has no unit; write e.g. 168s or 168h/],
      [{ "dead-retention": "1y" }, {}, /--dead-retention "1y" is not a duration/],
      [{ retention: "1000000h" }, {}, /--retention must be at most 100 years/],
    ] as const) {
      expect(() => resolveConfig(flags, environment)).toThrow(ConfigError);
      expect(() => resolveConfig(flags, environment)).toThrow(message);
    }
  });

  it("reads the TLS certificate and key files", () => {
    const dir = mkdtempSync(join(tmpdir(), "lq-tls-"));
    writeFileSync(join(dir, "c.pem"), "CERT");
    writeFileSync(join(dir, "k.pem"), "KEY");
    const config = resolveConfig({ "tls-cert": join(dir, "c.pem"), "tls-key": join(dir, "k.pem") }, {});
    expect(config.tls).toMatchObject({ cert: "CERT", key: "KEY" });
  });
});

describe("PostgreSQL settings (docs/postgresql.md)", () => {
  const URL_WITH_PASSWORD = "postgres://lq:s3cret-pw@db.internal:5432/jobs";

  it("keeps SQLite unless LEASEQUEUE_DATABASE_URL is set", () => {
    expect(resolveConfig({}, {}).postgres).toBeUndefined();
    expect(resolveConfig({}, { LEASEQUEUE_DATABASE_URL: "" }).postgres).toBeUndefined();
    expect(resolveConfig({}, { LEASEQUEUE_DATABASE_SCHEMA: "jobs" }).postgres).toBeUndefined();
  });

  it("selects PostgreSQL with a postgres:// URL, with the default schema, pool size and statement timeout", () => {
    expect(resolveConfig({}, { LEASEQUEUE_DATABASE_URL: URL_WITH_PASSWORD }).postgres).toEqual({
      url: URL_WITH_PASSWORD,
      schema: "leasequeue",
      poolSize: 10,
      statementTimeoutMs: 30_000,
    });
    expect(resolveConfig({ "database-url": "postgresql://127.0.0.1/test" }, {}).postgres?.url).toBe("postgresql://127.0.0.1/test");
    // A Unix socket directory as the host parameter.
    expect(resolveConfig({}, { LEASEQUEUE_DATABASE_URL: "postgres:///test?host=/var/run/postgresql" }).postgres?.schema).toBe("leasequeue");
  });

  it("reads the schema, pool size and statement timeout from the environment, and a flag wins", () => {
    const env = {
      LEASEQUEUE_DATABASE_URL: "postgres://db/test",
      LEASEQUEUE_DATABASE_SCHEMA: "jobs_v2",
      LEASEQUEUE_DATABASE_POOL_SIZE: "32",
      LEASEQUEUE_DATABASE_STATEMENT_TIMEOUT_MS: "0",
    };
    expect(resolveConfig({}, env).postgres).toMatchObject({ schema: "jobs_v2", poolSize: 32, statementTimeoutMs: 0 });
    expect(
      resolveConfig({ "database-schema": "other", "database-pool-size": "2", "database-statement-timeout-ms": "500" }, env).postgres,
    ).toMatchObject({ schema: "other", poolSize: 2, statementTimeoutMs: 500 });
  });

  it("lets the URL win over LEASEQUEUE_DATABASE_PATH, but refuses --db together with --database-url", () => {
    const config = resolveConfig({}, { LEASEQUEUE_DATABASE_PATH: "/data/leasequeue.db", LEASEQUEUE_DATABASE_URL: "postgres://db/test" });
    expect(config.postgres?.url).toBe("postgres://db/test");
    expect(() => resolveConfig({ db: "x.db", "database-url": "postgres://db/test" }, {})).toThrow(/--database-url .* --db/);
  });

  it("refuses a bad URL, schema, pool size or timeout, naming the setting", () => {
    const cases: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
      [{}, { LEASEQUEUE_DATABASE_URL: "not a url" }, /LEASEQUEUE_DATABASE_URL is not a URL/],
      [{}, { LEASEQUEUE_DATABASE_URL: "mysql://db/test" }, /LEASEQUEUE_DATABASE_URL must be a postgres:\/\//],
      [{ "database-url": "/var/lib/leasequeue.db" }, {}, /--database-url is not a URL/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres:///test" }, /names no host/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_SCHEMA: "Jobs" }, /LEASEQUEUE_DATABASE_SCHEMA must be/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_SCHEMA: 'x"; drop' }, /LEASEQUEUE_DATABASE_SCHEMA/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_SCHEMA: "pg_jobs" }, /not with pg_/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_SCHEMA: "a".repeat(64) }, /1-63/],
      [{ "database-pool-size": "0" }, { LEASEQUEUE_DATABASE_URL: "postgres://db/t" }, /--database-pool-size/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_POOL_SIZE: "1001" }, /LEASEQUEUE_DATABASE_POOL_SIZE/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_STATEMENT_TIMEOUT_MS: "50" }, /0 \(none\) or from 100/],
      [{}, { LEASEQUEUE_DATABASE_URL: "postgres://db/t", LEASEQUEUE_DATABASE_STATEMENT_TIMEOUT_MS: "1s" }, /STATEMENT_TIMEOUT_MS/],
    ];
    for (const [flags, env, message] of cases) {
      expect(() => resolveConfig(flags, env)).toThrow(ConfigError);
      expect(() => resolveConfig(flags, env)).toThrow(message);
    }
  });

  it("never puts the password of a refused URL into the error message", () => {
    for (const url of [
      "mysql://lq:s3cret-pw@db/test",
      "postgres://lq:s3cret-pw@/test",
      "http://lq@db/test?password=s3cret-pw&sslmode=require",
      "postgres://lq:s3cret-pw@db:0/test",
      "postgres://lq:s3cret-pw@db:99999/test",
      "s3cret-pw",
    ]) {
      let message = "";
      try {
        resolveConfig({}, { LEASEQUEUE_DATABASE_URL: url });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, url).toMatch(/^LEASEQUEUE_DATABASE_URL /);
      expect(message).not.toContain("s3cret-pw");
    }
  });

  it("redacts the password of a URL for logs, in the user part and as a parameter", () => {
    expect(redactDatabaseUrl(URL_WITH_PASSWORD)).toBe("postgres://lq:***@db.internal:5432/jobs");
    expect(redactDatabaseUrl("postgres://lq@db/test?sslmode=require&PassWord=pw")).toBe(
      "postgres://lq@db/test?sslmode=require&PassWord=***",
    );
    expect(redactDatabaseUrl("postgres://db/test")).toBe("postgres://db/test");
    expect(redactDatabaseUrl("pw-in-garbage @@")).toBe("(not a URL)");
  });
});

describe("reflection on the API port", () => {
  async function listServices(environment: string): Promise<string[]> {
    const t = await startTestServer({ environment });
    try {
      const client = createClient(ServerReflection, createGrpcTransport({ baseUrl: t.apiUrl }));
      for await (const res of client.serverReflectionInfo(streamOf({ messageRequest: { case: "listServices" as const, value: "" } }))) {
        if (res.messageResponse.case === "listServicesResponse") return res.messageResponse.value.service.map((s) => s.name);
      }
      return [];
    } finally {
      await t.close();
    }
  }

  it("is served in development", async () => {
    expect(await listServices("development")).toContain("leasequeue.v1.LeaseQueueService");
  });

  it("is not served in production", async () => {
    const err = await listServices("production").then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unimplemented);
  });
});
