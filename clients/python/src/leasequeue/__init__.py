"""LeaseQueue for Python: a producer Client and a Worker over the server's gRPC API.

    import leasequeue

    worker = leasequeue.Worker("http://127.0.0.1:8080", queue="emails", concurrency=8)

    @worker.task("welcome")
    def welcome(job):
        return {"sent": job.payload["user"]}

    worker.run()

See README.md beside the package for the producer, tokens, TLS and draining.
"""

from leasequeue.client import Client, DependencyFailurePolicy, Job, JobState
from leasequeue.errors import Permanent, Refused, Snooze
from leasequeue.worker import Dependency, LeasedJob, Worker, WorkerEvent

__all__ = [
    "Client",
    "Dependency",
    "DependencyFailurePolicy",
    "Job",
    "JobState",
    "LeasedJob",
    "Permanent",
    "Refused",
    "Snooze",
    "Worker",
    "WorkerEvent",
]
__version__ = "0.1.0"
