"""A LeaseQueue worker on the Python SDK (clients/python): demo.add, and demo.sleep on asyncio (README.md)."""

import asyncio
import logging
import os

import leasequeue

env = os.environ.get
worker = leasequeue.Worker(env("LEASEQUEUE_URL", "http://127.0.0.1:8080"), queue=env("LEASEQUEUE_QUEUE", "demo"), concurrency=4,
                           token=env("LEASEQUEUE_TOKEN") or None)


@worker.task("demo.add")
def add(job):
    a, b = job.payload.get("a"), job.payload.get("b")
    if not all(isinstance(n, (int, float)) for n in (a, b)):
        raise leasequeue.Permanent("demo.add needs numbers a and b")
    return {"sum": a + b}


@worker.task("demo.sleep")
async def sleep(job):
    await asyncio.sleep(job.payload.get("seconds", 1))
    return {"slept": job.payload.get("seconds", 1)}


logging.basicConfig(level=logging.INFO)
worker.run()  # until SIGTERM or Ctrl-C, then drains
