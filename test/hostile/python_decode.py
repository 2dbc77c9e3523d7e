#!/usr/bin/python3
"""Reads and leases jobs with Python's grpcio (Debian's, C++ protobuf runtime,
which stops decoding at 100 nested messages), to prove that every job the
server stores can be decoded by it.

Usage: python_decode.py TARGET STUBS_DIR < plan.json
  plan: {"getJobs": [id, ...], "listQueue": q, "claimQueue": q,
         "streamQueue": q, "streamCount": n}

Prints one JSON object: the payload and result of every job as decoded
(GetJob, every ListJobs page of listQueue, one Claim of claimQueue, the first
streamCount leases of a StreamClaims stream on streamQueue). Leases are
completed so they do not linger. Exits non-zero with a traceback on any
failure, decoding included.
"""

import json
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
TARGET, STUBS = sys.argv[1], sys.argv[2]
sys.path.insert(0, STUBS)

import grpc  # noqa: E402
from google.protobuf import duration_pb2, json_format  # noqa: E402
from leasequeue.v1 import leasequeue_pb2 as pb  # noqa: E402
from leasequeue.v1 import leasequeue_pb2_grpc as pb_grpc  # noqa: E402

TIMEOUT = 20  # seconds per call


def contents(job):
    return {
        "payload": json_format.MessageToDict(job.payload) if job.HasField("payload") else None,
        "result": json_format.MessageToDict(job.result) if job.HasField("result") else None,
    }


def main():
    plan = json.load(sys.stdin)
    out = {"getJob": {}, "listJobs": {}, "claim": {}, "stream": {}}
    with grpc.insecure_channel(TARGET) as channel:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        stub = pb_grpc.LeaseQueueServiceStub(channel)

        for job_id in plan["getJobs"]:
            out["getJob"][job_id] = contents(stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=TIMEOUT).job)

        token = ""
        while True:
            page = stub.ListJobs(pb.ListJobsRequest(queue=plan["listQueue"], page_size=2, page_token=token), timeout=TIMEOUT)
            for job in page.jobs:
                out["listJobs"][job.id] = contents(job)
            token = page.next_page_token
            if not token:
                break

        lease = duration_pb2.Duration(seconds=60)
        claimed = stub.Claim(pb.ClaimRequest(queue=plan["claimQueue"], worker_id="py-decode", lease_duration=lease, max_jobs=100), timeout=TIMEOUT)
        leases = list(claimed.leases)
        for l in leases:
            out["claim"][l.job.id] = contents(l.job)

        stream = stub.StreamClaims(
            pb.StreamClaimsRequest(queue=plan["streamQueue"], worker_id="py-decode", lease_duration=lease, max_in_flight=100),
            timeout=TIMEOUT,
        )
        for message in stream:
            if not message.HasField("lease"):
                continue
            leases.append(message.lease)
            out["stream"][message.lease.job.id] = contents(message.lease.job)
            if len(out["stream"]) == plan["streamCount"]:
                break
        stream.cancel()

        for l in leases:
            stub.Complete(pb.CompleteRequest(job_id=l.job.id, lease_token=l.lease_token), timeout=TIMEOUT)

    print(json.dumps(out))


if __name__ == "__main__":
    main()
