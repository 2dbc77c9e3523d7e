#!/usr/bin/python3
"""Submits LeaseQueue jobs from Python (grpcio) and prints one JSON line per job.

  /usr/bin/python3 producer.py demo.add '{"a": 2, "b": 3}'
  /usr/bin/python3 producer.py demo.sleep '{"seconds": 5}' --count 10
  /usr/bin/python3 producer.py demo.add '{"a": "x"}'        # dead-lettered by the worker

Environment: LEASEQUEUE_URL (http://127.0.0.1:8080), LEASEQUEUE_QUEUE
(default), LEASEQUEUE_TOKEN (a bearer token with the producer role, for a
server with authentication on; never printed), LEASEQUEUE_PYTHON_STUBS
(<repository>/gen/python).
"""

import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.dont_write_bytecode = True
sys.path.insert(0, os.environ.get("LEASEQUEUE_PYTHON_STUBS") or str(Path(__file__).resolve().parents[2] / "gen" / "python"))

import grpc  # noqa: E402
from google.protobuf import duration_pb2, json_format, struct_pb2  # noqa: E402
from leasequeue.v1 import leasequeue_pb2 as pb  # noqa: E402
from leasequeue.v1 import leasequeue_pb2_grpc as pb_grpc  # noqa: E402

from bearer import token_from_env, with_token  # noqa: E402


def open_channel(url):
    if "://" not in url:
        return grpc.insecure_channel(url)
    parts = urlsplit(url)
    if parts.scheme == "https":
        return grpc.secure_channel(parts.netloc, grpc.ssl_channel_credentials())
    return grpc.insecure_channel(parts.netloc)


def main():
    parser = argparse.ArgumentParser(description="Submit LeaseQueue jobs.")
    parser.add_argument("task")
    parser.add_argument("payload", nargs="?", default="null", help="JSON (default null)")
    parser.add_argument("--queue", default=os.environ.get("LEASEQUEUE_QUEUE", "default"))
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--priority", type=int, default=0)
    parser.add_argument("--max-attempts", type=int, default=0, help="0: the server's default (3)")
    parser.add_argument("--retry-base-delay", type=float, help="seconds (server default 15)")
    args = parser.parse_args()

    payload = json_format.ParseDict(json.loads(args.payload), struct_pb2.Value())
    token = token_from_env()
    with open_channel(os.environ.get("LEASEQUEUE_URL", "http://127.0.0.1:8080")) as channel:
        stub = pb_grpc.LeaseQueueServiceStub(with_token(channel, token))
        for _ in range(args.count):
            request = pb.SubmitRequest(
                queue=args.queue, task=args.task, payload=payload, priority=args.priority, max_attempts=args.max_attempts
            )
            if args.retry_base_delay is not None:
                d = duration_pb2.Duration()
                d.FromNanoseconds(int(round(args.retry_base_delay * 1e9)))
                request.retry_base_delay.CopyFrom(d)
            try:
                job = stub.Submit(request, timeout=10).job
            except grpc.RpcError as err:
                hint = " (LEASEQUEUE_TOKEN is not set)" if token is None and err.code() == grpc.StatusCode.UNAUTHENTICATED else ""
                sys.exit(f"Submit failed: {err.code().name} {err.details()}{hint}")
            print(json.dumps({"id": job.id, "queue": job.queue, "task": job.task, "state": pb.JobState.Name(job.state)}), flush=True)


if __name__ == "__main__":
    main()
