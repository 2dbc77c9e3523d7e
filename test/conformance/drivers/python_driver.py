"""Conformance driver for the Python SDK (clients/python), run by test/conformance/.

Registers the suite's tasks on a leasequeue.Worker configured from the
environment, runs it until SIGTERM, and prints one JSON line per worker event
on stdout ({"event": ..., "job": ..., "code": ..., "message": ...}) plus a
"run" line each time a handler starts (none of the per-job lines with
LEASEQUEUE_DRIVER_QUIET=1). When run() raises leasequeue.Refused (a refusal no
retry can cure) it prints an "ended" line with the code and message and exits
1. Without LEASEQUEUE_WORKER_ID the worker takes its default id. Logs go to
stderr.
"""

import json
import logging
import os
import sys
import threading
import time

import leasequeue

out = threading.Lock()


# LEASEQUEUE_DRIVER_QUIET=1 (bench/sdks.mjs): no line per job, only the worker's own events.
QUIET = os.environ.get("LEASEQUEUE_DRIVER_QUIET") == "1"
logging.basicConfig(
    level=logging.WARNING if QUIET else logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
)


def emit(**fields):
    if QUIET and fields.get("job"):
        return
    with out:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def on_event(e):
    emit(event=e.kind.replace("_", "-"), job=e.job_id, code=e.code.lower(), message=e.message)


env = os.environ
ca_file = env.get("LEASEQUEUE_CA_FILE")
worker = leasequeue.Worker(
    env["LEASEQUEUE_URL"],
    root_certificates=open(ca_file, "rb").read() if ca_file else None,
    queue=env["LEASEQUEUE_QUEUE"],
    concurrency=int(env.get("LEASEQUEUE_CONCURRENCY", "4")),
    token=env.get("LEASEQUEUE_TOKEN") or None,
    lease_duration=float(env.get("LEASEQUEUE_LEASE_SECONDS", "10")),
    drain_timeout=float(env.get("LEASEQUEUE_DRAIN_SECONDS", "10")),
    worker_id=env.get("LEASEQUEUE_WORKER_ID") or None,
    reconnect_backoff=(0.1, 1.0),
    on_event=on_event,
)


def started(job):
    emit(event="run", job=job.id, attempt=job.attempts)


@worker.task("echo")
def echo(job):
    started(job)
    return {"echo": job.payload}


@worker.task("fail")
def fail(job):
    started(job)
    raise RuntimeError(job.payload["message"])


@worker.task("permanent")
def permanent(job):
    started(job)
    raise leasequeue.Permanent(job.payload["message"])


@worker.task("snooze")
def snooze(job):
    started(job)
    if job.deliveries == 1:
        job.snooze(job.payload["seconds"])
    return {"attempts": job.attempts, "deliveries": job.deliveries}


@worker.task("hold")
def hold(job):
    # Reports `progress` (if given), then runs until the test creates `file`
    # (or the lease is lost, or the job is cancelled while it runs).
    started(job)
    progress = job.payload.get("progress")
    if progress is not None:
        job.progress(progress)
    while not os.path.exists(job.payload["file"]) and not job.cancelled.is_set() and not job.lease_lost.wait(0.01):
        pass
    return {"reported": progress}


@worker.task("sleep")
async def sleep(job):
    # An async def handler: it runs on the worker's asyncio loop.
    import asyncio

    started(job)
    await asyncio.sleep(job.payload["seconds"])
    return {"slept": job.payload["seconds"]}


@worker.task("noop")
def noop(job):
    started(job)
    return None


@worker.task("deps")
def deps(job):
    # Reports the dependencies it sees, and the echo.n of each result an "echo" dependency returned.
    started(job)
    return {
        "truncated": job.dependencies_truncated,
        "dependencies": [{"id": d.job_id, "state": d.state.name, "result": d.result, "lastError": d.last_error} for d in job.dependencies],
        "decoded": [job.dependency_result(d.job_id)["echo"]["n"] for d in job.dependencies if d.result is not None],
    }


emit(event="ready", sdk="python", pid=os.getpid(), time=time.time())
try:
    worker.run()
except leasequeue.Refused as refused:
    emit(event="ended", code=refused.code.name.lower(), message=refused.details)
    sys.exit(1)
emit(event="exit")
