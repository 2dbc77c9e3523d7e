"""A LeaseQueue worker on the Python SDK (clients/python): demo.add and demo.sleep."""

import asyncio
import logging
import os

import leasequeue

worker = leasequeue.Worker(
    os.environ.get("LEASEQUEUE_URL", "http://127.0.0.1:8080"),
    queue=os.environ.get("LEASEQUEUE_QUEUE", "demo"),
    concurrency=4,
    token=os.environ.get("LEASEQUEUE_TOKEN") or None,
)


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


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    worker.run()  # until SIGTERM or Ctrl-C, then drains
