"""The Worker against an in-process fake server (fake_server.py): offline.

Each test waits on what it means (docs/development.md "How a test waits"): an
acknowledgement or a Claim the fake received, an Event a handler sets, a log
record of the worker; every wait is bounded by fake_server.TIMEOUT. None
sleeps, and none measures how long something took.
"""

import asyncio
import logging
import os
import socket
import threading
import unittest
from unittest import mock

import grpc

import leasequeue
import leasequeue._lease
from fake_server import TIMEOUT, FakeServer, lease


def start(worker):
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


class LogSeen(logging.Handler):
    """Sets `seen` once the worker logs a record containing `text`."""

    def __init__(self, test, text):
        super().__init__()
        self.text = text
        self.seen = threading.Event()
        logger = logging.getLogger("leasequeue.worker")
        logger.addHandler(self)
        test.addCleanup(logger.removeHandler, self)

    def emit(self, record):
        if self.text in record.getMessage():
            self.seen.set()


class WorkerOutcomes(unittest.TestCase):
    def setUp(self):
        self.leases = [
            lease("add", 2),
            lease("boom"),
            lease("never"),
            lease("later"),
            lease("async", 5),
            lease("nobody"),
        ]
        self.fake = FakeServer(self.leases)
        self.addCleanup(self.fake.close)
        self.events = []
        # No heartbeat falls due while the test runs (a third of an hour), and a
        # progress report waits for the handler's end however slow the machine
        # (PROGRESS_DELAY would send it after a second): the acks on the wire
        # are the same at any pace.
        progress_delay = mock.patch.object(leasequeue._lease, "PROGRESS_DELAY", 3600.0)
        progress_delay.start()
        self.addCleanup(progress_delay.stop)
        self.worker = leasequeue.Worker(
            self.fake.target, queue="q", concurrency=8, worker_id="unit-1", lease_duration=3600, on_event=self.events.append
        )
        w = self.worker

        @w.task("add")
        def add(job):
            job.progress({"half": True})
            return {"sum": job.payload + 1}

        @w.task("boom")
        def boom(job):
            raise RuntimeError("it broke")

        @w.task("never")
        def never(job):
            raise leasequeue.Permanent("bad input")

        @w.task("later")
        def later(job):
            try:
                job.snooze(1.5)
            except leasequeue.Snooze:
                return "caught"  # the snooze stands however the handler ends

        @w.task("async")
        async def async_handler(job):
            await asyncio.sleep(0.01)
            return [job.payload, job.attempts]

    def test_each_outcome_is_acknowledged_on_the_work_stream(self):
        t = start(self.worker)
        outcomes = {a.job_id: a for _, a in self.fake.wait_for_outcomes(6)}
        self.worker.stop()
        t.join(TIMEOUT)
        self.assertFalse(t.is_alive())
        self.assertEqual(self.fake.starts[0].queue, "q")
        self.assertEqual(self.fake.starts[0].worker_id, "unit-1")
        self.assertEqual(self.fake.starts[0].max_in_flight, 8)
        self.assertEqual(self.fake.starts[0].lease_duration.seconds, 3600)
        add, boom, never, later, async_job, nobody = (outcomes[one.job.id] for one in self.leases)
        self.assertEqual(add.complete.result.struct_value.fields["sum"].number_value, 3)
        self.assertEqual((boom.fail.error, boom.fail.permanent), ("it broke", False))
        self.assertEqual((never.fail.error, never.fail.permanent), ("bad input", True))
        self.assertEqual(later.snooze.delay.ToMilliseconds(), 1500)
        self.assertEqual([v.number_value for v in async_job.complete.result.list_value.values], [5, 1])
        self.assertIn("no handler for task 'nobody'", nobody.fail.error)
        self.assertFalse(nobody.fail.permanent)
        # The progress went with a heartbeat ahead of the completion, in the same order on the wire.
        kinds = [(a.job_id, a.WhichOneof("outcome")) for _, a in self.fake.acks if a.job_id == self.leases[0].job.id]
        self.assertEqual(kinds, [(self.leases[0].job.id, "heartbeat"), (self.leases[0].job.id, "complete")])
        self.assertTrue(all(how == "work" for how, _ in self.fake.acks))
        # Batched: fewer messages than acknowledgements (add's heartbeat and
        # completion are queued together, so they share a message at any pace).
        self.assertLess(len(self.fake.messages), len(self.fake.acks))
        self.assertTrue(self.fake.half_closed.wait(TIMEOUT), "the stream was not half-closed at stop")
        kinds = [e.kind for e in self.events]
        self.assertIn("connected", kinds)
        self.assertEqual(kinds.count("completed"), 2)
        self.assertEqual(kinds[-1], "stopped")


class WorkerWithoutWork(unittest.TestCase):
    def test_falls_back_to_stream_claims_and_acknowledge(self):
        leases = [lease("t", i) for i in range(20)]
        fake = FakeServer(leases, work=False)
        self.addCleanup(fake.close)
        worker = leasequeue.Worker(fake.target, queue="q", concurrency=20)

        @worker.task("t")
        def t(job):
            return job.payload

        thread = start(worker)
        outcomes = fake.wait_for_outcomes(20)
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive())
        self.assertEqual(sorted(a.complete.result.number_value for _, a in outcomes), list(range(20)))
        self.assertTrue(all(how == "acknowledge" for how, _ in outcomes))


    def test_falls_back_to_claim_carrying_the_acknowledgements_without_streams(self):
        leases = [lease("t", n) for n in range(40)]
        fake = FakeServer(leases, streams=False)
        self.addCleanup(fake.close)
        events = []
        worker = leasequeue.Worker(fake.target, queue="q", concurrency=4, on_event=events.append)
        last_started, last_may_return = threading.Event(), threading.Event()

        @worker.task("t")
        def t(job):
            if job.payload == 40:
                last_started.set()
                last_may_return.wait(TIMEOUT)
            return job.payload

        thread = start(worker)
        outcomes = fake.wait_for_outcomes(40)
        self.assertEqual(sorted(a.complete.result.number_value for _, a in outcomes), list(range(40)))
        self.assertTrue(all(how in ("claim", "acknowledge") for how, _ in outcomes))
        # The queue had work throughout: the outcomes rode the Claims that fetched the next leases.
        self.assertGreater(sum(1 for how, _ in outcomes if how == "claim"), 20)
        with fake.lock:
            claims = list(fake.claims)
        self.assertTrue(all(max_jobs <= 4 for max_jobs, _, _ in claims), claims)
        # A Claim carrying acknowledgements never waits: their answers come back at once.
        self.assertEqual([c for c in claims if c[2] > 0 and c[1] > 0], [])
        self.assertEqual([e.kind for e in events if e.kind == "connected"], ["connected"])

        # Idle: a long-poll is pending; an outcome due then goes by Acknowledge at once
        # (while the long-poll, CLAIM_WAIT long, still waits at the server).
        fake.wait_for("a Claim long-polling while idle", lambda: fake.polling > 0)
        fake.add_leases([lease("t", 40)])
        self.assertTrue(last_started.wait(TIMEOUT), "the last job's handler did not start")
        # The long-poll that brought the lease has ended: the worker sends the next
        # one while the handler holds its slot, and only then does the handler return.
        fake.wait_for("the next Claim long-polling", lambda: fake.polling > 0)
        last_may_return.set()
        how, last = fake.wait_for_outcomes(41)[-1]
        self.assertEqual(last.complete.result.number_value, 40)
        self.assertEqual(how, "acknowledge")
        self.assertIn(last.job_id, fake.acked_while_polling)
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive())


class Drain(unittest.TestCase):
    def test_a_handler_past_the_drain_timeout_is_left_to_lease_expiry(self):
        slow, quick = lease("slow"), lease("quick")
        fake = FakeServer([slow, quick])
        self.addCleanup(fake.close)
        worker = leasequeue.Worker(fake.target, queue="q", concurrency=2, drain_timeout=0.3)
        released, told, may_return = threading.Event(), threading.Event(), threading.Event()
        dropped = LogSeen(self, "finished after the drain timeout; left to lease expiry")
        lost = []

        @worker.task("slow")
        def slow_handler(job):
            released.set()
            lost.append(job.lease_lost.wait(TIMEOUT))
            told.set()
            # Returns only once run() has: run() must not wait for it.
            may_return.wait(TIMEOUT)
            return "too late"

        @worker.task("quick")
        def quick_handler(job):
            return "ok"

        thread = start(worker)
        fake.wait_for_outcomes(1)
        self.assertTrue(released.wait(TIMEOUT), "the slow handler did not start")
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive(), "run() waited for a handler past the drain timeout")
        self.assertTrue(told.wait(TIMEOUT))
        self.assertEqual(lost, [True])
        may_return.set()
        # The worker took the late result and dropped it: nothing was sent for the slow job.
        self.assertTrue(dropped.seen.wait(TIMEOUT), "the late result was not dropped")
        self.assertEqual([a.job_id for _, a in fake.outcomes()], [quick.job.id])


class Cancellation(unittest.TestCase):
    """A job cancelled while its handler runs (Cancel with include_running): the stream says so, nothing is sent for it."""

    def worker(self, fake, events):
        # One slot: the job after the cancelled one runs only once the cancelled handler has returned.
        return leasequeue.Worker(fake.target, queue="q", concurrency=1, lease_duration=3600, on_event=events.append)

    def test_a_job_cancelled_on_the_work_stream_sets_job_cancelled_and_sends_no_outcome(self):
        held, after, last = lease("hold"), lease("quick", 1), lease("quick", 2)
        fake = FakeServer([held])
        self.addCleanup(fake.close)
        events = []
        worker = self.worker(fake, events)
        started, told = threading.Event(), []

        @worker.task("hold")
        def hold(job):
            started.set()
            told.append(job.cancelled.wait(TIMEOUT))
            told.append(job.lease_lost.is_set())
            return "too late"  # dropped: the job was cancelled

        @worker.task("quick")
        def quick(job):
            return job.payload

        thread = start(worker)
        self.assertTrue(started.wait(TIMEOUT), "the handler did not start")
        fake.wait_for_stream()
        fake.cancel("a job this worker does not hold")  # ignored
        fake.cancel(held.job.id)
        fake.add_leases([after])
        fake.wait_for("the next job's outcome", lambda: any(a.job_id == after.job.id for _, a in fake.acks))
        # A cancellation for a job the worker has finished with is ignored too.
        fake.cancel(after.job.id)
        fake.add_leases([last])
        fake.wait_for("the last job's outcome", lambda: any(a.job_id == last.job.id for _, a in fake.acks))
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive())
        self.assertEqual(told, [True, False])
        # Nothing at all went out for the cancelled job (no outcome, no heartbeat); the others completed.
        self.assertEqual([a.job_id for _, a in fake.acks if a.job_id == held.job.id], [])
        self.assertEqual([(a.job_id, a.WhichOneof("outcome")) for _, a in fake.outcomes()], [(after.job.id, "complete"), (last.job.id, "complete")])
        cancelled = [e for e in events if e.kind == "cancelled"]
        self.assertEqual([(e.job_id, e.task) for e in cancelled], [(held.job.id, "hold")])
        self.assertEqual([e for e in events if e.kind in ("lease_lost", "error", "abandoned")], [])

    def test_an_async_handler_is_cancelled_on_stream_claims_and_its_slot_freed(self):
        held, after = lease("wait"), lease("quick", 1)
        fake = FakeServer([held], work=False)
        self.addCleanup(fake.close)
        events = []
        worker = self.worker(fake, events)
        started, seen = threading.Event(), []

        @worker.task("wait")
        async def wait(job):
            started.set()
            try:
                await asyncio.Event().wait()  # never set: only the cancellation ends it
            except asyncio.CancelledError:
                seen.append(job.cancelled.is_set())
                raise
            return "never"

        @worker.task("quick")
        def quick(job):
            return job.payload

        thread = start(worker)
        self.assertTrue(started.wait(TIMEOUT), "the handler did not start")
        fake.wait_for_stream()
        fake.cancel(held.job.id)
        fake.add_leases([after])
        outcomes = fake.wait_for_outcomes(1)
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive())
        self.assertEqual(seen, [True])
        self.assertEqual([(how, a.job_id) for how, a in outcomes], [("acknowledge", after.job.id)])
        self.assertEqual([a.job_id for _, a in fake.acks if a.job_id == held.job.id], [])
        self.assertEqual([e.job_id for e in events if e.kind == "cancelled"], [held.job.id])


class Refusals(unittest.TestCase):
    """A refusal no retry can cure stops the worker: run() drains and raises Refused; others are retried."""

    def run_refused(self, code, details):
        fake = FakeServer([lease("t", 1)], refuse=(code, details))
        self.addCleanup(fake.close)
        events = []
        worker = leasequeue.Worker(fake.target, queue="q", reconnect_backoff=(0.01, 0.05), on_event=events.append)
        worker.task("t")(lambda job: job.payload)
        with self.assertRaises(leasequeue.Refused) as caught:
            worker.run()
        return fake, events, caught.exception

    def test_each_final_code_stops_the_worker_at_the_first_refusal(self):
        for code in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.INVALID_ARGUMENT,
        ):
            with self.subTest(code=code.name):
                fake, events, refused = self.run_refused(code, "start.queue: not for you")
                self.assertEqual((refused.code, refused.details), (code, "start.queue: not for you"))
                self.assertEqual(str(refused), f"the server refused the worker: {code.name}: start.queue: not for you")
                self.assertEqual(fake.refusals, ["Work"])
                self.assertEqual([e.kind for e in events], ["error", "stopping", "stopped"])
                self.assertEqual((events[0].code, events[0].message), (code.name, "start.queue: not for you"))

    def test_unimplemented_falls_back_path_by_path_then_stops(self):
        fake, events, refused = self.run_refused(grpc.StatusCode.UNIMPLEMENTED, "unknown service")
        self.assertEqual(refused.code, grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(fake.refusals, ["Work", "StreamClaims", "Claim"])
        self.assertEqual([e.kind for e in events], ["error", "stopping", "stopped"])

    def test_a_passing_failure_is_retried_with_backoff_until_stop(self):
        for code, details in (
            (grpc.StatusCode.UNAVAILABLE, "restarting"),
            (grpc.StatusCode.INTERNAL, "store failed"),
            # About one acknowledgement, not the worker: sent again, it is refused on its own.
            (grpc.StatusCode.INVALID_ARGUMENT, "acks[0].lease_token: is required"),
        ):
            with self.subTest(code=code.name):
                fake = FakeServer(refuse=(code, details))
                self.addCleanup(fake.close)
                events = []
                worker = leasequeue.Worker(fake.target, queue="q", reconnect_backoff=(0.01, 0.05), on_event=events.append)
                worker.task("t")(lambda job: None)
                thread = start(worker)
                fake.wait_for("three refused Work streams", lambda: len(fake.refusals) >= 3)
                worker.stop()
                thread.join(TIMEOUT)
                self.assertFalse(thread.is_alive())
                self.assertEqual(set(fake.refusals), {"Work"})
                kinds = [e.kind for e in events]
                self.assertNotIn("error", kinds)
                self.assertGreaterEqual(kinds.count("disconnected"), 2)
                self.assertEqual(kinds[-1], "stopped")


class Options(unittest.TestCase):
    def test_bad_options_are_refused_naming_the_field(self):
        cases = [
            (dict(queue="bad queue"), "queue"),
            (dict(queue="q", concurrency=0), "concurrency"),
            (dict(queue="q", lease_duration=0.5), "lease_duration"),
            (dict(queue="q", worker_id="a b"), "worker_id"),
            (dict(queue="q", token="Bearer x"), "token"),
            (dict(queue="q", drain_timeout=-1), "drain_timeout"),
            (dict(queue="q", reconnect_backoff=(2, 1)), "reconnect_backoff"),
            (dict(queue="q", ack_batch_window=5), "ack_batch_window"),
            (dict(queue="q", root_certificates=b"PEM"), "root_certificates"),
        ]
        for kwargs, field in cases:
            with self.subTest(field=field):
                with self.assertRaisesRegex(ValueError, f"^{field}:"):
                    leasequeue.Worker("http://127.0.0.1:1", **kwargs)

    def test_values_of_the_wrong_type_are_refused_naming_the_field(self):
        cases = [
            ("target", 8080, dict(queue="q")),
            ("queue", 7, {}),
            ("concurrency", "4", dict(queue="q")),
            ("concurrency", True, dict(queue="q")),
            ("token", 12345, dict(queue="q")),
            ("lease_duration", "60", dict(queue="q")),
            ("worker_id", 42, dict(queue="q")),
            ("heartbeat_interval", "5", dict(queue="q")),
            ("drain_timeout", None, dict(queue="q")),
            ("root_certificates", "PEM text", dict(queue="q")),
            ("reconnect_backoff", 0.25, dict(queue="q")),
            ("reconnect_backoff", ("0.25", 30), dict(queue="q")),
            ("ack_batch_window", "0.002", dict(queue="q")),
            ("on_event", "print", dict(queue="q")),
            ("handle_signals", "yes", dict(queue="q")),
            ("trace_link", 1, dict(queue="q")),
        ]
        for field, value, others in cases:
            with self.subTest(field=field, value=value):
                args = dict(others)
                target = "http://127.0.0.1:1"
                if field == "target":
                    target = value
                else:
                    args[field] = value
                with self.assertRaisesRegex(TypeError, f"^{field}:"):
                    leasequeue.Worker(target, **args)

    def test_a_missing_queue_is_refused_by_name(self):
        with self.assertRaisesRegex(TypeError, "'queue'"):
            leasequeue.Worker("http://127.0.0.1:1")  # type: ignore[call-arg]

    def test_the_worker_id_defaults_to_py_host_pid(self):
        worker = leasequeue.Worker("http://127.0.0.1:1", queue="q")
        self.assertEqual(worker.worker_id, f"py-{socket.gethostname()}-{os.getpid()}"[:128])

    def test_a_token_is_never_quoted(self):
        secret = "lq_secret token"
        with self.assertRaises(ValueError) as caught:
            leasequeue.Worker("http://127.0.0.1:1", queue="q", token=secret)
        self.assertNotIn("secret", str(caught.exception))
        self.assertIn("15 characters", str(caught.exception))

    def test_run_needs_a_handler(self):
        with self.assertRaisesRegex(RuntimeError, "register a handler"):
            leasequeue.Worker("http://127.0.0.1:1", queue="q").run()

    def test_snooze_and_progress_bounds(self):
        with self.assertRaisesRegex(ValueError, "snooze"):
            leasequeue.Snooze(31 * 24 * 3600)
        with self.assertRaises(TypeError):
            leasequeue.Snooze("soon")


if __name__ == "__main__":
    unittest.main()
