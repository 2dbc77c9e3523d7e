#!/usr/bin/python3
"""A LeaseQueue client in Python (grpcio, insecure h2c), as a producer and a
worker written in another language would use the server.

Usage: python_client.py TARGET STUBS_DIR
  TARGET     host:port of the API port
  STUBS_DIR  where protoc put the generated modules:
             leasequeue/v1/leasequeue_pb2{,_grpc}.py and google/rpc/*_pb2.py

Prints one JSON object (the summary) on stdout and exits 0, or prints a
traceback and exits non-zero on an unexpected error. The caller
(python-grpc.test.ts) asserts the summary.
"""

import json
import sys
import time

if len(sys.argv) != 3:
    sys.exit(__doc__)
TARGET, STUBS = sys.argv[1], sys.argv[2]
sys.path.insert(0, STUBS)

import grpc  # noqa: E402
from google.protobuf import duration_pb2, json_format, struct_pb2  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from leasequeue.v1 import leasequeue_pb2 as pb  # noqa: E402
from leasequeue.v1 import leasequeue_pb2_grpc as pb_grpc  # noqa: E402

TIMEOUT = 10  # seconds per call


def value(obj):
    """A JSON-like Python object as google.protobuf.Value."""
    v = struct_pb2.Value()
    json_format.ParseDict(obj, v)
    return v


def seconds(s):
    return duration_pb2.Duration(seconds=s)


def after(timestamp, t):
    """Seconds from `t` (time.time()) to a Timestamp, to the millisecond."""
    return round(timestamp.ToMilliseconds() / 1000 - t, 3)


def state_name(job):
    return pb.JobState.Name(job.state)


def error_summary(err):
    """Code, message and decoded google.rpc details of a failed call."""
    out = {"code": err.code().name, "message": err.details(), "errorInfo": None, "badRequestFields": []}
    for key, raw in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(raw)
        out["statusCode"] = status.code
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                out["errorInfo"] = {"reason": info.reason, "domain": info.domain, "metadata": dict(info.metadata)}
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                out["badRequestFields"] += [v.field for v in bad.field_violations]
    return out


def expect_error(call):
    try:
        call()
    except grpc.RpcError as err:
        return error_summary(err)
    raise AssertionError("the call succeeded; an error was expected")


def main():
    summary = {}
    with grpc.insecure_channel(TARGET) as channel:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        stub = pb_grpc.LeaseQueueServiceStub(channel)
        queue = "python"

        # Producer: two jobs; the first one also carries its key as a header.
        first = stub.Submit(
            pb.SubmitRequest(queue=queue, task="thumbnail.render", payload=value({"imageId": "img_9", "sizes": [64, 128]}), priority=10),
            metadata=[("idempotency-key", "py-1")],
            timeout=TIMEOUT,
        )
        replay = stub.Submit(
            pb.SubmitRequest(queue=queue, task="thumbnail.render", payload=value({"imageId": "img_9", "sizes": [64, 128]}), priority=10, idempotency_key="py-1"),
            timeout=TIMEOUT,
        )
        second = stub.Submit(
            pb.SubmitRequest(queue=queue, task="thumbnail.render", payload=value({"imageId": "img_10"}), max_attempts=2, retry_base_delay=seconds(30)),
            timeout=TIMEOUT,
        )
        summary["submit"] = {
            "id": first.job.id,
            "state": state_name(first.job),
            "deduplicated": first.deduplicated,
            "replayId": replay.job.id,
            "replayDeduplicated": replay.deduplicated,
            "payload": json_format.MessageToDict(first.job.payload),
            "maxAttempts": first.job.max_attempts,
        }

        # Worker: claim both (higher priority first), with a 30 s lease.
        started = time.time()
        claimed = stub.Claim(pb.ClaimRequest(queue=queue, worker_id="py-worker-1", lease_duration=seconds(30), max_jobs=10), timeout=TIMEOUT)
        answered = time.time()
        leases = list(claimed.leases)
        summary["claim"] = {
            "ids": [lease.job.id for lease in leases],
            "states": [state_name(lease.job) for lease in leases],
            "workerIds": [lease.job.worker_id for lease in leases],
            "tokensPresent": all(len(lease.lease_token) > 0 for lease in leases),
            # The lease's end, in seconds from the call's answer and from its start (the server's time was between them).
            "leaseSeconds": [after(leases[0].job.lease_expire_time, answered), after(leases[0].job.lease_expire_time, started)] if leases else None,
        }
        by_id = {lease.job.id: lease for lease in leases}
        a, b = by_id[first.job.id], by_id[second.job.id]

        started = time.time()
        beat = stub.Heartbeat(pb.HeartbeatRequest(job_id=a.job.id, lease_token=a.lease_token, lease_duration=seconds(300)), timeout=TIMEOUT)
        answered = time.time()
        summary["heartbeat"] = {
            "state": state_name(beat.job),
            "leaseSeconds": [after(beat.job.lease_expire_time, answered), after(beat.job.lease_expire_time, started)],
        }

        # A wrong token is refused; the error details ride in the trailer.
        summary["wrongToken"] = expect_error(
            lambda: stub.Complete(pb.CompleteRequest(job_id=a.job.id, lease_token="not-the-token"), timeout=TIMEOUT)
        )

        done = stub.Complete(pb.CompleteRequest(job_id=a.job.id, lease_token=a.lease_token, result=value({"thumbnails": 2})), timeout=TIMEOUT)
        summary["complete"] = {
            "state": state_name(done.job),
            "result": json_format.MessageToDict(done.job.result),
            "finished": done.job.HasField("finish_time"),
        }

        started = time.time()
        failed = stub.Fail(pb.FailRequest(job_id=b.job.id, lease_token=b.lease_token, error="image not found"), timeout=TIMEOUT)
        answered = time.time()
        summary["fail"] = {
            "state": state_name(failed.job),
            "lastError": failed.job.last_error,
            "attempts": failed.job.attempts,
            # Retry after retry_base_delay * 2^(attempts-1) = 30 s.
            "retryInSeconds": [after(failed.job.schedule_time, answered), after(failed.job.schedule_time, started)],
        }

        # A field out of bounds (priority is -100..100).
        summary["outOfBounds"] = expect_error(
            lambda: stub.Submit(pb.SubmitRequest(queue=queue, task="thumbnail.render", priority=1000), timeout=TIMEOUT)
        )

        events = stub.ListJobEvents(pb.ListJobEventsRequest(job_id=a.job.id), timeout=TIMEOUT)
        summary["events"] = [pb.EventKind.Name(e.kind) for e in events.events]

    print(json.dumps(summary))


if __name__ == "__main__":
    main()
