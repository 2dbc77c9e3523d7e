/**
 * `--otel`: a local OTLP/HTTP receiver the server under test exports its
 * spans to (OTEL_EXPORTER_OTLP_ENDPOINT), so that (b) can be measured with
 * and without tracing in one run. It answers every POST /v1/traces with 200
 * and counts the exports and their bytes; it decodes nothing (a collector's
 * work is not the server's cost).
 */
import { once } from "node:events";
import * as http from "node:http";

export async function startOtlpReceiver() {
  let exports = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on("data", (chunk) => (bytes += chunk.length));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") exports++;
      res.writeHead(req.url === "/v1/traces" ? 200 : 404, { "content-type": "application/x-protobuf" }).end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** Exports and bytes received so far. */
    stats: () => ({ exports, bytes }),
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))),
  };
}
