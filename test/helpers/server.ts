/** Starts a real LeaseQueue server on free ports with a fresh database, for tests. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { startServer, type RunningServer, type StartOptions } from "../../src/app.js";
import { resolveConfig, type Config } from "../../src/config.js";
import { silentLogger } from "../../src/logger.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

export interface TestServer {
  server: RunningServer;
  config: Config;
  apiUrl: string;
  metricsUrl: string;
  dir: string;
  /** Typed Connect client (JSON over HTTP/1.1). */
  client: Client<typeof LeaseQueueService>;
  /** POST a Connect JSON call the way curl does; returns the status and parsed body. */
  call(method: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

export async function startTestServer(flags: Record<string, string> = {}, options: Omit<StartOptions, "log"> = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-test-"));
  const config = resolveConfig({ db: join(dir, "jobs.db"), port: "0", "metrics-port": "0", ...flags }, {});
  const server = await startServer(config, { log: silentLogger, ...options });
  const transport = createConnectTransport({ baseUrl: server.apiUrl, httpVersion: "1.1", useBinaryFormat: false });
  return {
    server,
    config,
    apiUrl: server.apiUrl,
    metricsUrl: server.metricsUrl,
    dir,
    client: createClient(LeaseQueueService, transport),
    async call(method, body, headers = {}) {
      const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text === "" ? undefined : JSON.parse(text) };
    },
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
