"""An in-process stand-in for the LeaseQueue server, for offline unit tests.

It implements just enough of leasequeue.v1 to watch the SDK's side of the
protocol: Submit, SubmitBatch (refs resolved to ids) and GetJob for the Client, and leases handed out on Work (or,
with `work=False`, StreamClaims plus Acknowledge; with `streams=False`, Claim
carrying acknowledgements plus Acknowledge) for the Worker. Every
acknowledgement received is recorded with how it arrived, and answered OK
(ABORTED for a job `cancel` cancelled, as the server refuses its token).
`add_leases` and `cancel` push to the open streams as the server does: more
leases, and a running job's cancellation (Work's cancelled_job_ids, a
StreamClaims message with cancelled_job_id). With `refuse=(code, details)`,
Work, StreamClaims and Claim end with that status at once, as the server
refuses a worker (a token without the queue, say); `refusals` records each.

The tests wait on what the fake records (`wait_for`, `wait_for_outcomes`):
every change is made under `lock` and wakes its waiters, and a wait fails
naming what it waited for once TIMEOUT has passed (docs/development.md
"How a test waits"). Nothing here sleeps for a time.
"""

import queue
import threading
import time
import uuid
from concurrent import futures

import grpc
from google.protobuf import struct_pb2

from leasequeue.v1 import leasequeue_pb2 as pb
from leasequeue.v1 import leasequeue_pb2_grpc as pb_grpc

#: The bound on every wait of the tests, in seconds: far beyond any machine's
#: pace (what it waits for takes milliseconds), not an expectation of it.
TIMEOUT = 30.0


def lease(task, payload=None, attempts=1, max_attempts=3, deliveries=1, trace_context=None):
    job = pb.Job(id=str(uuid.uuid4()), queue="q", task=task, state=pb.JOB_STATE_RUNNING, attempts=attempts,
                 max_attempts=max_attempts, deliveries=deliveries, trace_context=trace_context or {})
    if payload is not None:
        job.payload.CopyFrom(struct_pb2.Value(string_value=payload) if isinstance(payload, str) else struct_pb2.Value(number_value=payload))
    return pb.Lease(job=job, lease_token=uuid.uuid4().hex)


class FakeServer(pb_grpc.LeaseQueueServiceServicer):
    def __init__(self, leases=(), work=True, streams=True, refuse=None):
        self.leases = list(leases)
        self.refuse = refuse
        self.refusals = []  # the RPCs refused with `refuse`, in order
        self.work = work and streams
        self.streams = streams
        self.claims = []  # (max_jobs, wait in seconds, number of acks) per Claim
        self.polling = 0  # Claims long-polling (wait > 0) now
        self.lock = threading.Condition()
        self.acks = []  # (how, Acknowledgement)
        self.acked_while_polling = []  # job ids of acknowledgements that arrived while a Claim long-polled
        self.messages = []  # (how, number of acks) per WorkRequest or AcknowledgeRequest
        self.starts = []
        self.submits = []
        self.batches = []
        self.half_closed = threading.Event()
        self.cancelled = set()  # job ids cancel() cancelled: their acknowledgements are refused
        self.streams_open = []  # a queue.Queue of messages to push per open Work or StreamClaims stream
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_LeaseQueueServiceServicer_to_server(self, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.target = f"http://127.0.0.1:{port}"
        self.server.start()

    def close(self):
        self.server.stop(0)

    def outcomes(self):
        with self.lock:
            return [(how, a) for how, a in self.acks if a.WhichOneof("outcome") != "heartbeat"]

    def wait_for(self, what, check, timeout=TIMEOUT):
        """Waits until check() (called with the lock held) is true; fails naming `what` after `timeout` seconds."""
        with self.lock:
            if not self.lock.wait_for(check, timeout):
                raise AssertionError(f"waited {timeout}s for {what}; acks: {self.acks}; claims: {self.claims}")

    def wait_for_outcomes(self, n, timeout=TIMEOUT):
        self.wait_for(f"{n} outcomes", lambda: len(self.outcomes()) >= n, timeout)
        return self.outcomes()

    def _record(self, how, acks):
        with self.lock:
            self.messages.append((how, len(acks)))
            self.acks.extend((how, a) for a in acks)
            if self.polling:
                self.acked_while_polling.extend(a.job_id for a in acks)
            self.lock.notify_all()
            refused = set(self.cancelled)
        return [self._result(a.job_id, a.job_id in refused) for a in acks]

    @staticmethod
    def _result(job_id, cancelled):
        result = pb.AcknowledgementResult(job_id=job_id)
        if cancelled:
            result.status.code = grpc.StatusCode.ABORTED.value[0]
            result.status.message = f"job {job_id} was cancelled while running"
        return result

    def _open_stream(self):
        """A queue of what to push on a stream now opening (`add_leases`, `cancel`); None ends it."""
        pushed = queue.Queue()
        with self.lock:
            self.streams_open.append(pushed)
            self.lock.notify_all()
        return pushed

    def _close_stream(self, pushed):
        with self.lock:
            self.streams_open.remove(pushed)
            self.lock.notify_all()

    def cancel(self, job_id):
        """Cancels a running job: its acknowledgements are refused from now on, and every open stream is told."""
        with self.lock:
            self.cancelled.add(job_id)
            for pushed in self.streams_open:
                pushed.put(("cancelled", job_id))
            self.lock.notify_all()

    def _refuse(self, rpc, context):
        if self.refuse is None:
            return
        with self.lock:
            self.refusals.append(rpc)
            self.lock.notify_all()
        context.abort(*self.refuse)

    # -- RPCs ---------------------------------------------------------------

    def Submit(self, request, context):
        self.submits.append(request)
        return pb.SubmitResponse(job=self._job(request, str(uuid.uuid4()), {}))

    def SubmitBatch(self, request, context):
        self.batches.append(request)
        ids = {one.ref or str(i): str(uuid.uuid4()) for i, one in enumerate(request.jobs)}
        jobs = [self._job(one, ids[one.ref or str(i)], ids) for i, one in enumerate(request.jobs)]
        return pb.SubmitBatchResponse(results=[pb.SubmitResponse(job=job) for job in jobs])

    @staticmethod
    def _job(request, id, ids):
        depends_on = list(request.depends_on) + [ids[ref] for ref in request.depends_on_refs]
        state = pb.JOB_STATE_WAITING if depends_on else pb.JOB_STATE_QUEUED
        job = pb.Job(id=id, queue=request.queue, task=request.task, state=state, depends_on=depends_on)
        job.payload.CopyFrom(request.payload)
        return job

    def GetJob(self, request, context):
        job = pb.Job(id=request.job_id, queue="q", task="t", state=pb.JOB_STATE_COMPLETED, attempts=1)
        job.result.CopyFrom(struct_pb2.Value(number_value=7))
        return pb.GetJobResponse(job=job)

    def Work(self, request_iterator, context):
        self._refuse("Work", context)
        if not self.work:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no Work here")
        first = next(request_iterator)
        self.starts.append(first.start)
        pushed = self._open_stream()  # before the first leases go out: a push for them is never missed

        def read():
            # The requests are read beside the responses, so that a push goes out while the worker sends nothing.
            try:
                for message in request_iterator:
                    pushed.put(("results", self._record("work", list(message.acks))))
                pushed.put(("half-closed", None))
            except grpc.RpcError:
                pushed.put(None)

        try:
            yield pb.WorkResponse()
            leases, self.leases = self.leases, []
            if leases:
                yield pb.WorkResponse(leases=leases)
            threading.Thread(target=read, daemon=True).start()
            context.add_callback(lambda: pushed.put(None))
            while True:
                item = pushed.get()
                if item is None:
                    return
                kind, value = item
                if kind == "half-closed":
                    break
                if kind == "results":
                    yield pb.WorkResponse(results=value)
                elif kind == "leases":
                    yield pb.WorkResponse(leases=value)
                else:
                    yield pb.WorkResponse(cancelled_job_ids=[value])
        finally:
            self._close_stream(pushed)
        self.half_closed.set()

    def StreamClaims(self, request, context):
        self._refuse("StreamClaims", context)
        if not self.streams:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "no StreamClaims here")
        pushed = self._open_stream()
        try:
            yield pb.StreamClaimsResponse()
            leases, self.leases = self.leases, []
            for one in leases:
                yield pb.StreamClaimsResponse(lease=one)
            if not context.add_callback(lambda: pushed.put(None)):
                return
            while True:
                item = pushed.get()
                if item is None:
                    return
                kind, value = item
                if kind == "leases":
                    for one in value:
                        yield pb.StreamClaimsResponse(lease=one)
                else:
                    yield pb.StreamClaimsResponse(cancelled_job_id=value)
        finally:
            self._close_stream(pushed)

    def Acknowledge(self, request, context):
        return pb.AcknowledgeResponse(results=self._record("acknowledge", list(request.acks)))

    def Claim(self, request, context):
        """Applies the acks (recorded as "claim"), then leases up to max_jobs, long-polling up to `wait`."""
        self._refuse("Claim", context)
        wait = request.wait.ToMilliseconds() / 1000
        with self.lock:
            self.claims.append((request.max_jobs, wait, len(request.acks)))
            self.lock.notify_all()
        results = self._record("claim", list(request.acks)) if request.acks else []
        deadline = time.monotonic() + wait
        ended = []

        def cancelled():
            with self.lock:
                ended.append(True)
                self.lock.notify_all()

        context.add_callback(cancelled)
        with self.lock:
            if wait > 0:
                self.polling += 1
                self.lock.notify_all()
            try:
                while not self.leases and not ended and context.is_active() and time.monotonic() < deadline:
                    self.lock.wait(max(0.0, deadline - time.monotonic()))
                leases, self.leases = self.leases[: max(1, request.max_jobs)], self.leases[max(1, request.max_jobs) :]
            finally:
                if wait > 0:
                    self.polling -= 1
                    self.lock.notify_all()
        return pb.ClaimResponse(leases=leases, results=results)

    def add_leases(self, leases):
        """More work: pushed on the open streams' first, else for Claim (waking a pending long-poll)."""
        with self.lock:
            if self.streams_open:
                self.streams_open[0].put(("leases", list(leases)))
            else:
                self.leases.extend(leases)
            self.lock.notify_all()

    def wait_for_stream(self):
        """Waits until a Work or StreamClaims stream is open (one that `add_leases` and `cancel` reach)."""
        self.wait_for("an open stream", lambda: bool(self.streams_open))
