/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and sums self time per function,
 * so the bench can say what bounds the server: the top entries by self time,
 * each with its share of the time the server was busy.
 */

/**
 * Top `n` functions by self time: [{fn, where, selfMs, share}], where share
 * is of the busy time (every sample but "(idle)", which is reported apart as
 * `idleShare`).
 *
 * `window` ({fromUs, toUs}) keeps only the samples taken in that span, in
 * the profile's own clock: microseconds of CLOCK_MONOTONIC, the clock of
 * `process.hrtime` in every process of the machine, so another process can
 * name the span (the bench: its throughput phase, without the server's
 * startup and idle waits).
 */
export function topSelfTime(profile, n, window) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  const deltas = profile.timeDeltas ?? [];
  let total = 0;
  let at = profile.startTime ?? 0;
  for (let k = 0; k < profile.samples.length; k++) {
    const dt = deltas[k] ?? 0;
    at += dt;
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue;
    total += dt;
    const id = profile.samples[k];
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  }
  const byFunction = new Map();
  for (const [id, us] of selfUs) {
    const { callFrame } = byId.get(id);
    const fn = callFrame.functionName || "(anonymous)";
    const where = callFrame.url ? `${shortUrl(callFrame.url)}:${callFrame.lineNumber + 1}` : "";
    const key = `${fn}\u0000${where}`;
    const entry = byFunction.get(key) ?? { fn, where, selfMs: 0, share: 0 };
    entry.selfMs += us / 1000;
    byFunction.set(key, entry);
  }
  const idleMs = [...byFunction.values()].filter((e) => e.fn === "(idle)").reduce((a, e) => a + e.selfMs, 0);
  const busyMs = total / 1000 - idleMs;
  const entries = [...byFunction.values()]
    .filter((e) => e.fn !== "(idle)")
    .sort((a, b) => b.selfMs - a.selfMs)
    .slice(0, n);
  for (const e of entries) {
    e.share = busyMs > 0 ? e.selfMs / busyMs : 0;
    e.selfMs = Number(e.selfMs.toFixed(1));
    e.share = Number(e.share.toFixed(4));
  }
  const areas = new Map();
  const layers = new Map(LAYERS.map((l) => [l, 0]));
  for (const e of byFunction.values()) {
    if (e.fn === "(idle)") continue;
    const area = areaOf(e);
    areas.set(area, (areas.get(area) ?? 0) + e.selfMs);
    const layer = layerOf(e);
    layers.set(layer, layers.get(layer) + e.selfMs);
  }
  const byArea = [...areas]
    .map(([area, ms]) => ({ area, selfMs: Number(ms.toFixed(1)), share: busyMs > 0 ? Number((ms / busyMs).toFixed(4)) : 0 }))
    .sort((a, b) => b.selfMs - a.selfMs);
  const byLayer = [...layers].map(([layer, ms]) => ({ layer, selfMs: Number(ms.toFixed(1)) }));
  return {
    totalMs: Number((total / 1000).toFixed(1)),
    idleShare: total > 0 ? Number((idleMs / (total / 1000)).toFixed(4)) : 0,
    busyMs: Number(busyMs.toFixed(1)),
    top: entries,
    byArea,
    byLayer,
  };
}

/**
 * The layers of the server's CPU budget per job (docs/performance.md "Where
 * the CPU goes"), in the order a job passes through them.
 */
export const LAYERS = [
  "transport and framing",
  "message codecs",
  "validation and mapping",
  "dispatch",
  "store",
  "garbage collector",
  "other JavaScript (app, metrics, logs, domain)",
  "(program): native code outside any JavaScript function (on a worker thread also its waits for messages)",
];

/**
 * The files whose functions encode or decode messages by hand (the rest of
 * src/service/ validates and maps; the rest of src/server/ is transport),
 * found in src/server/fast-wire/ or, in a build from before that folder,
 * src/service/, so that a comparison with an older build charges them alike.
 */
const CODEC_FILES = [
  "lease-encoding.js",
  "proto-writer.js",
  "json-text-value.js",
  "watch-frames.js",
  "watch-event-frames.js",
  "proto-reading.js",
  "submit-decoding.js",
  "ack-decoding.js",
  "encoded-responses.js",
].flatMap((name) => [`dist/src/server/fast-wire/${name}`, `dist/src/service/${name}`]);

/** The layer a function's self time is charged to: by the file it is in. */
export function layerOf({ fn, where }) {
  if (fn === "(garbage collector)") return LAYERS[5];
  if (fn === "(program)" || fn === "(root)") return LAYERS[7];
  if (where.startsWith("node_modules/@bufbuild/") || where.startsWith("dist/gen/") || CODEC_FILES.some((f) => where.startsWith(f)))
    return LAYERS[1];
  if (where.startsWith("node:") || where.startsWith("node_modules/@connectrpc/") || where.startsWith("dist/src/server/")) return LAYERS[0];
  if (where.startsWith("dist/src/service/")) return LAYERS[2];
  if (where.startsWith("dist/src/dispatch/")) return LAYERS[3];
  if (
    where.startsWith("dist/src/store/") ||
    where.startsWith("node_modules/better-sqlite3/") ||
    where.startsWith("node_modules/pg/") ||
    where.startsWith("node_modules/pg-protocol/")
  )
    return LAYERS[4];
  return LAYERS[6];
}

/**
 * The server's CPU per job by layer, over every thread's profile (`summaries`:
 * topSelfTime's answers for the same window): each layer's sampled self time
 * / jobs, and what the JavaScript threads' samples do not cover (the
 * process's CPU from /proc minus their busy time: V8's helper threads,
 * libuv's pool, the kernel's work for the process's system calls; 0 when
 * the samples add up to more, which a worker thread's "(program)" samples,
 * taken while it waits, can make them).
 */
export function layerBudget(summaries, jobs, serverCpuMsPerJob) {
  const perJob = (ms) => Number((ms / jobs).toFixed(4));
  const rows = LAYERS.map((layer) => ({
    layer,
    msPerJob: perJob(summaries.reduce((sum, s) => sum + (s.byLayer.find((l) => l.layer === layer)?.selfMs ?? 0), 0)),
  }));
  const sampled = rows.reduce((sum, r) => sum + r.msPerJob, 0);
  rows.push({
    layer: "outside the JavaScript threads' samples (GC helpers, libuv pool, kernel)",
    msPerJob: Number(Math.max(0, serverCpuMsPerJob - sampled).toFixed(4)),
  });
  return rows;
}

/**
 * Where a function's self time belongs. SQLite's own work (native, inside
 * better-sqlite3 calls) is charged to the JavaScript function that called
 * the statement, so "server: store" is mostly SQLite executing statements.
 */
function areaOf({ fn, where }) {
  if (fn === "(garbage collector)") return "garbage collector";
  if (fn === "(program)" || fn === "(root)") return "V8/native outside JavaScript";
  if (where.startsWith("dist/src/store/")) return "server: store (the SQL statements run from here)";
  if (where.startsWith("dist/src/dispatch/")) return "server: dispatch (claim streams, wake-ups, event feed)";
  if (where.startsWith("dist/src/service/")) return "server: service (validation, wire mapping)";
  if (where.startsWith("dist/src/") || where.startsWith("dist/gen/")) return "server: other (app, server, metrics, domain, generated code)";
  if (where.startsWith("node_modules/better-sqlite3/")) return "better-sqlite3 wrappers (exec: BEGIN/COMMIT, fsync)";
  if (where.startsWith("node_modules/@connectrpc/")) return "connect-es (RPC protocol)";
  if (where.startsWith("node_modules/@bufbuild/")) return "protobuf-es (encode/decode)";
  if (where.startsWith("node_modules/")) return `other packages (${where.split("/")[1]}...)`;
  if (where.startsWith("node:")) return "Node.js internals (http2, net, streams, zlib, crypto, events)";
  return "other";
}

function shortUrl(url) {
  const s = url.replace(/^file:\/\//, "");
  const nm = s.lastIndexOf("/node_modules/");
  if (nm >= 0) return s.slice(nm + 1);
  const dist = s.indexOf("/dist/");
  if (dist >= 0) return s.slice(dist + 1);
  return s;
}
