/**
 * The database processes' CPU over a throughput phase, so that a row's
 * total CPU per job counts the work wherever it runs (docs/performance.md
 * "What it measures"). Three kinds of database:
 *
 * - SQLite runs inside the LeaseQueue server: nothing extra to count.
 * - PostgreSQL: every `postgres` process, read from /proc around the phase.
 *   The run's own backends (those whose client port is a socket of one of
 *   the run's processes, from pg_stat_activity) and PostgreSQL's own
 *   processes (postmaster, WAL writer, checkpointer, background writer,
 *   autovacuum: they work for the run's commits) are counted; client
 *   backends of other connections (another program on the same server) are
 *   reported apart and left out. The background processes also serve any
 *   other user, which the bench cannot split off.
 * - Redis and RabbitMQ: the redis-server or beam.smp process(es), all of
 *   their threads; another client of the same broker would be counted too.
 *
 * Each meter has start() and stop(); stop() returns a promise of {ms, ...detail}.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import pg from "pg";
import { commandCpuMeter, pidsByCommand, processCpuMs } from "./proc.mjs";

/** SQLite: the store's work is in the server's own CPU. */
export function inServerProcessMeter() {
  return {
    database: "SQLite, inside the server process (its CPU is in the server column)",
    start() {},
    stop() {
      return Promise.resolve({ ms: 0 });
    },
  };
}

/** A broker's processes by command name (redis-server, RabbitMQ's beam.smp): every process of that name, all threads. */
export function daemonCpuMeter(command) {
  const meter = commandCpuMeter(command);
  return {
    database: `every ${command} process`,
    start() {
      meter.start();
    },
    stop() {
      return Promise.resolve({ ms: meter.stop() });
    },
  };
}

/** Local TCP ports of the sockets that processes `pids` hold open (from /proc/<pid>/fd and /proc/net/tcp{,6}). */
export function localTcpPorts(pids) {
  const inodes = new Set();
  for (const pid of pids) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone
    }
    for (const fd of fds) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match !== null) inodes.add(match[1]);
      } catch {
        // closed while we looked
      }
    }
  }
  const ports = new Set();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || !inodes.has(f[9])) continue;
      ports.add(Number.parseInt(f[1].split(":")[1], 16));
    }
  }
  return ports;
}

function sampleCpu(pids) {
  const m = new Map();
  for (const pid of pids) {
    const cpu = processCpuMs(pid);
    if (cpu !== null) m.set(pid, cpu);
  }
  return m;
}

/**
 * Every `postgres` process's CPU over the phase, split by who it served.
 * `runPids()` gives the pids of the run's processes that talk to PostgreSQL
 * (the LeaseQueue server, or a peer's client processes) at stop time. A
 * backend that exits inside the phase takes its CPU with it (the bench's own
 * short polling connections, for one), so stop before the run disconnects.
 */
export function postgresCpuMeter(url, runPids) {
  let before = new Map();
  return {
    database: "every postgres process: the run's backends and PostgreSQL's own (WAL writer, checkpointer, ...)",
    start() {
      before = sampleCpu(pidsByCommand("postgres"));
    },
    async stop() {
      // Who is who first (the query's own backend is known by pid), then the CPU, so that nothing leaves in between.
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT pid, backend_type, client_port, pg_backend_pid() AS self FROM pg_stat_activity");
        const ports = localTcpPorts(runPids());
        const after = sampleCpu(pidsByCommand("postgres"));
        const kind = new Map(
          rows.map((r) => [r.pid, r.backend_type !== "client backend" ? "background" : ports.has(r.client_port) ? "run" : "other"]),
        );
        const self = rows[0]?.self;
        const split = { runBackendsMs: 0, backgroundMs: 0, otherBackendsMs: 0, runBackends: 0, otherBackends: 0 };
        for (const [pid, cpu] of after) {
          if (pid === self) continue;
          const delta = cpu - (before.get(pid) ?? 0);
          // Not in pg_stat_activity: the postmaster (it forks the run's connections) or a process that came and went.
          const k = kind.get(pid) ?? "background";
          if (k === "run") {
            split.runBackendsMs += delta;
            split.runBackends += 1;
          } else if (k === "other") {
            split.otherBackendsMs += delta;
            if (delta > 0) split.otherBackends += 1;
          } else split.backgroundMs += delta;
        }
        return { ms: split.runBackendsMs + split.backgroundMs, ...split };
      } finally {
        await client.end();
      }
    },
  };
}
