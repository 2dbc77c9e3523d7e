"""Submits one LeaseQueue job with the Python SDK: producer.py TASK JSON [--wait].

Prints the job's id; with --wait, waits for the job to end (at most a
minute) and prints it as JSON instead: its state, result and last error.
"""

import json
import os
import sys

import leasequeue

client = leasequeue.Client(os.environ.get("LEASEQUEUE_URL", "http://127.0.0.1:8080"), token=os.environ.get("LEASEQUEUE_TOKEN") or None)
args = [a for a in sys.argv[1:] if a != "--wait"]
task, payload = args[0], json.loads(args[1]) if len(args) > 1 else None
queue = os.environ.get("LEASEQUEUE_QUEUE", "demo")
if "--wait" in sys.argv:
    job, finished = client.submit_and_wait(queue, task, payload, wait_timeout=60)
    print(json.dumps({"id": job.id, "state": job.state.name, "finished": finished, "result": job.result, "lastError": job.last_error}))
else:
    print(client.submit(queue, task, payload).id)
