"""The Worker against an in-process fake server (fake_server.py): offline."""

import asyncio
import threading
import time
import unittest

import leasequeue
from fake_server import FakeServer, lease


def start(worker):
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


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
        self.worker = leasequeue.Worker(
            self.fake.target, queue="q", concurrency=8, worker_id="unit-1", lease_duration=30, on_event=self.events.append
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
        t.join(10)
        self.assertFalse(t.is_alive())
        self.assertEqual(self.fake.starts[0].queue, "q")
        self.assertEqual(self.fake.starts[0].worker_id, "unit-1")
        self.assertEqual(self.fake.starts[0].max_in_flight, 8)
        self.assertEqual(self.fake.starts[0].lease_duration.seconds, 30)
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
        # Batched: fewer messages than acknowledgements.
        self.assertLess(len(self.fake.messages), len(self.fake.acks))
        self.assertTrue(self.fake.half_closed.wait(5), "the stream was not half-closed at stop")
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
        thread.join(10)
        self.assertEqual(sorted(a.complete.result.number_value for _, a in outcomes), list(range(20)))
        self.assertTrue(all(how == "acknowledge" for how, _ in outcomes))


class Drain(unittest.TestCase):
    def test_a_handler_past_the_drain_timeout_is_left_to_lease_expiry(self):
        slow, quick = lease("slow"), lease("quick")
        fake = FakeServer([slow, quick])
        self.addCleanup(fake.close)
        worker = leasequeue.Worker(fake.target, queue="q", concurrency=2, drain_timeout=0.3)
        released = threading.Event()
        lost = []

        @worker.task("slow")
        def slow_handler(job):
            released.set()
            job.lease_lost.wait(10)
            lost.append(job.lease_lost.is_set())
            return "too late"

        @worker.task("quick")
        def quick_handler(job):
            return "ok"

        thread = start(worker)
        fake.wait_for_outcomes(1)
        self.assertTrue(released.wait(5))
        began = time.monotonic()
        worker.stop()
        thread.join(10)
        self.assertLess(time.monotonic() - began, 5)
        time.sleep(0.2)
        self.assertEqual(lost, [True])
        self.assertEqual([a.job_id for _, a in fake.outcomes()], [quick.job.id])


class Options(unittest.TestCase):
    def test_bad_options_are_refused_naming_the_field(self):
        cases = [
            (dict(queue="bad queue"), "queue"),
            (dict(queue="q", concurrency=0), "concurrency"),
            (dict(queue="q", lease_duration=0.5), "lease_duration"),
            (dict(queue="q", worker_id="a b"), "worker_id"),
            (dict(queue="q", token="Bearer x"), "token"),
            (dict(queue="q", drain_timeout=-1), "drain_timeout"),
        ]
        for kwargs, field in cases:
            with self.subTest(field=field):
                with self.assertRaisesRegex(ValueError, f"^{field}:"):
                    leasequeue.Worker("http://127.0.0.1:1", **kwargs)

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
