/**
 * Slow and idle HTTP/1.1 clients against a real server process with short
 * timeouts (LEASEQUEUE_REQUEST_HEADERS_TIMEOUT_MS, LEASEQUEUE_REQUEST_TIMEOUT_MS,
 * LEASEQUEUE_KEEPALIVE_TIMEOUT_MS): slow headers (slowloris), slow bodies and
 * idle keep-alive connections are cut, and other clients are served meanwhile.
 */
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { okJson } from "../helpers/process.js";
import { errorLines, SERVICE, spawnHostileServer, type HostileServer } from "./raw-http2.js";

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 1_500;
const KEEPALIVE_TIMEOUT_MS = 1_000;
const SLOW_CLIENTS = 50;
/** Generous bound for "cut": the timeouts plus Node's check interval, on a noisy machine. */
const CUT_WITHIN_MS = 15_000;

let server: HostileServer;
beforeAll(async () => {
  server = await spawnHostileServer({
    LEASEQUEUE_REQUEST_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    LEASEQUEUE_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    LEASEQUEUE_KEEPALIVE_TIMEOUT_MS: String(KEEPALIVE_TIMEOUT_MS),
  });
}, 60_000);
afterAll(async () => {
  await server?.cleanup();
});

interface SlowClient {
  /** Resolves when the server closed the connection, with what it answered. */
  closed: Promise<{ answer: string; afterMs: number }>;
}

/** Connects, writes `first`, then one byte of `drip` every 200 ms until the server closes the connection. */
function slowClient(first: string, drip: string): SlowClient {
  const { hostname, port } = new URL(server.apiUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  const opened = performance.now();
  let answer = "";
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => (answer += d));
  socket.on("error", () => {});
  socket.once("connect", () => socket.write(first));
  const timer = setInterval(() => {
    if (!socket.destroyed) socket.write(drip);
  }, 200);
  return {
    closed: new Promise((resolve) =>
      socket.once("close", () => {
        clearInterval(timer);
        resolve({ answer, afterMs: performance.now() - opened });
      }),
    ),
  };
}

describe("slow HTTP/1.1 clients", () => {
  it("cuts 50 connections sending their headers a byte at a time (slowloris), serving others meanwhile", async () => {
    const clients = Array.from({ length: SLOW_CLIENTS }, () =>
      slowClient(`POST ${SERVICE}/Submit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `, "a"),
    );
    const honest = await okJson(server.apiUrl, "Submit", { queue: "honest", task: "t" });
    expect(honest.job.queue).toBe("honest");
    const results = await Promise.all(clients.map((c) => c.closed));
    const slowest = Math.max(...results.map((r) => r.afterMs));
    console.log(`${SLOW_CLIENTS} slowloris connections cut after at most ${Math.round(slowest)} ms; ${server.describeMemory()}`);
    for (const r of results) expect(r.answer === "" || r.answer.startsWith("HTTP/1.1 408")).toBe(true);
    expect(slowest).toBeLessThan(CUT_WITHIN_MS);
  }, 60_000);

  it("answers 408 to connections whose body trickles in slower than the request timeout", async () => {
    const clients = Array.from({ length: SLOW_CLIENTS }, () =>
      slowClient(
        `POST ${SERVICE}/Submit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
        " ",
      ),
    );
    const honest = await okJson(server.apiUrl, "Submit", { queue: "honest", task: "t" });
    expect(honest.job.queue).toBe("honest");
    const results = await Promise.all(clients.map((c) => c.closed));
    const slowest = Math.max(...results.map((r) => r.afterMs));
    console.log(`${SLOW_CLIENTS} slow-body connections cut after at most ${Math.round(slowest)} ms`);
    for (const r of results) expect(r.answer).toMatch(/^HTTP\/1\.1 408/);
    expect(slowest).toBeLessThan(CUT_WITHIN_MS);
  }, 60_000);

  it("closes an idle keep-alive connection after the keep-alive timeout", async () => {
    const { hostname, port } = new URL(server.apiUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    socket.setEncoding("latin1");
    let answer = "";
    socket.on("data", (d: string) => (answer += d));
    const closed = new Promise<number>((resolve) => {
      let answeredAt = 0;
      socket.on("data", () => (answeredAt ||= performance.now()));
      socket.once("close", () => resolve(performance.now() - answeredAt));
    });
    const body = JSON.stringify({ service: "" });
    socket.write(
      `POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n${body}`,
    );
    const idleMs = await closed;
    console.log(`idle keep-alive connection closed ${Math.round(idleMs)} ms after its response (timeout ${KEEPALIVE_TIMEOUT_MS} ms)`);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(idleMs).toBeLessThan(CUT_WITHIN_MS);
  }, 60_000);

  it("drops a connection that never sends a byte", async () => {
    const { hostname, port } = new URL(server.apiUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    const opened = performance.now();
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("close", () => resolve()));
    const afterMs = performance.now() - opened;
    console.log(`silent connection dropped after ${Math.round(afterMs)} ms (headers timeout ${HEADERS_TIMEOUT_MS} ms)`);
    expect(afterMs).toBeLessThan(CUT_WITHIN_MS);
  }, 60_000);

  it("logged none of it as a server failure, and still serves", async () => {
    expect(errorLines(server)).toEqual([]);
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "after", task: "t" });
    expect(job.queue).toBe("after");
  });
});
