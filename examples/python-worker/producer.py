"""Submits one LeaseQueue job with the Python SDK and prints its id: producer.py TASK JSON."""

import json
import os
import sys

import leasequeue

client = leasequeue.Client(os.environ.get("LEASEQUEUE_URL", "http://127.0.0.1:8080"), token=os.environ.get("LEASEQUEUE_TOKEN") or None)
task, payload = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
job = client.submit(os.environ.get("LEASEQUEUE_QUEUE", "demo"), task, payload)
print(job.id)
