"""Dependencies (docs/api.md "Dependencies"), offline against fake_server.py.

A handler reads its job's dependencies' outcomes (`job.dependencies`,
`job.dependencies_truncated`, `job.dependency_result`) on each path a lease
arrives by, and the Client sends depends_on, on_dependency_failure, ref and
depends_on_refs. The tests wait on the acknowledgements the fake received.
"""

import dataclasses
import threading
import unittest

import leasequeue
from fake_server import TIMEOUT, FakeServer, lease
from leasequeue import _wire
from leasequeue.v1 import leasequeue_pb2 as pb

RENDERED = "0190b3c4-0000-7000-8000-000000000001"
BROKEN = "0190b3c4-0000-7000-8000-000000000002"


def with_dependencies(one, dependencies, truncated=False):
    """`one` (a Lease) carrying `dependencies`: (job_id, state, result or None, last_error) each."""
    for job_id, state, result, last_error in dependencies:
        dependency = one.dependencies.add(job_id=job_id, state=state, last_error=last_error)
        if result is not None:
            dependency.result.CopyFrom(_wire.to_value(result))
        one.job.depends_on.append(job_id)
    one.dependencies_truncated = truncated
    return one


class HandlerReadsDependencies(unittest.TestCase):
    def run_worker(self, fake, n):
        """Runs a worker whose "merge" handler records what it saw, until the fake has `n` outcomes."""
        worker = leasequeue.Worker(fake.target, queue="q", concurrency=2, lease_duration=3600)
        seen = {}

        @worker.task("merge")
        def merge(job):
            seen[job.id] = job
            return [one.job_id for one in job.dependencies]

        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        fake.wait_for_outcomes(n)
        worker.stop()
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive())
        return seen

    def leases(self):
        merge = with_dependencies(
            lease("merge"),
            [
                (RENDERED, pb.JOB_STATE_COMPLETED, {"url": "s3://pages/1.pdf", "pages": 12}, ""),
                (BROKEN, pb.JOB_STATE_DEAD, None, "page 2 is missing"),
            ],
        )
        unknown_state = with_dependencies(lease("merge"), [(RENDERED, 99, None, "")], truncated=True)
        return merge, unknown_state, lease("merge")

    def check(self, fake, merge, unknown_state, alone):
        seen = self.run_worker(fake, 3)
        job = seen[merge.job.id]
        self.assertEqual(
            job.dependencies,
            [
                leasequeue.Dependency(RENDERED, leasequeue.JobState.COMPLETED, {"url": "s3://pages/1.pdf", "pages": 12}, ""),
                leasequeue.Dependency(BROKEN, leasequeue.JobState.DEAD, None, "page 2 is missing"),
            ],
        )
        self.assertIsInstance(job.dependency_result(RENDERED)["pages"], int)
        self.assertFalse(job.dependencies_truncated)
        self.assertEqual(job.dependency_result(RENDERED), {"url": "s3://pages/1.pdf", "pages": 12})
        self.assertIsNone(job.dependency_result(BROKEN))
        with self.assertRaisesRegex(KeyError, "is not a dependency of this job"):
            job.dependency_result("0190b3c4-0000-7000-8000-000000000009")
        with self.assertRaises(dataclasses.FrozenInstanceError):
            job.dependencies[0].result = None  # type: ignore[misc]
        other = seen[unknown_state.job.id]
        self.assertEqual(other.dependencies[0].state, leasequeue.JobState.UNSPECIFIED)
        self.assertTrue(other.dependencies_truncated)
        with self.assertRaisesRegex(KeyError, "not among the first 1 dependencies"):
            other.dependency_result(BROKEN)
        self.assertEqual((seen[alone.job.id].dependencies, seen[alone.job.id].dependencies_truncated), ([], False))
        results = {a.job_id: [v.string_value for v in a.complete.result.list_value.values] for _, a in fake.outcomes()}
        self.assertEqual(results[merge.job.id], [RENDERED, BROKEN])

    def test_on_the_work_stream(self):
        leases = self.leases()
        fake = FakeServer(leases)
        self.addCleanup(fake.close)
        self.check(fake, *leases)

    def test_on_stream_claims(self):
        leases = self.leases()
        fake = FakeServer(leases, work=False)
        self.addCleanup(fake.close)
        self.check(fake, *leases)

    def test_on_claim(self):
        leases = self.leases()
        fake = FakeServer(leases, streams=False)
        self.addCleanup(fake.close)
        self.check(fake, *leases)


class ProducerSendsDependencies(unittest.TestCase):
    def setUp(self):
        self.fake = FakeServer()
        self.addCleanup(self.fake.close)
        self.client = leasequeue.Client(self.fake.target)
        self.addCleanup(self.client.close)

    def test_submit_sends_depends_on_and_the_policy(self):
        job = self.client.submit("q", "merge", None, depends_on=[RENDERED, BROKEN], on_dependency_failure="ignore")
        self.client.submit("q", "merge", None, depends_on=(RENDERED,), on_dependency_failure=leasequeue.DependencyFailurePolicy.CANCEL)
        self.client.submit("q", "plain")
        first, second, plain = self.fake.submits
        self.assertEqual((list(first.depends_on), first.on_dependency_failure), ([RENDERED, BROKEN], pb.DEPENDENCY_FAILURE_POLICY_IGNORE))
        self.assertEqual((list(second.depends_on), second.on_dependency_failure), ([RENDERED], pb.DEPENDENCY_FAILURE_POLICY_CANCEL))
        self.assertEqual((list(plain.depends_on), plain.on_dependency_failure), ([], pb.DEPENDENCY_FAILURE_POLICY_UNSPECIFIED))
        self.assertEqual((job.state, job.depends_on), (leasequeue.JobState.WAITING, (RENDERED, BROKEN)))

    def test_submit_refuses_bad_dependencies_before_sending(self):
        with self.assertRaisesRegex(TypeError, "^depends_on: must be a list of strings"):
            self.client.submit("q", "t", depends_on=RENDERED)
        with self.assertRaisesRegex(ValueError, "^on_dependency_failure: must be"):
            self.client.submit("q", "t", depends_on=[RENDERED], on_dependency_failure="retry")
        with self.assertRaisesRegex(ValueError, "^on_dependency_failure: must be"):
            self.client.submit("q", "t", depends_on=[RENDERED], on_dependency_failure=True)
        self.assertEqual(self.fake.submits, [])

    def test_submit_batch_sends_a_graph_by_refs(self):
        jobs = self.client.submit_batch(
            [
                {"queue": "render", "task": "page", "payload": {"page": 1}, "ref": "p1"},
                {"queue": "render", "task": "page", "payload": {"page": 2}, "ref": "p2", "priority": 5},
                {"queue": "merge", "task": "merge", "depends_on_refs": ["p1", "p2"], "depends_on": [RENDERED], "on_dependency_failure": "cancel"},
            ]
        )
        request = self.fake.batches[0]
        self.assertEqual([(one.ref, list(one.depends_on_refs)) for one in request.jobs], [("p1", []), ("p2", []), ("", ["p1", "p2"])])
        self.assertEqual(request.jobs[1].priority, 5)
        self.assertEqual((list(request.jobs[2].depends_on), request.jobs[2].on_dependency_failure), ([RENDERED], pb.DEPENDENCY_FAILURE_POLICY_CANCEL))
        self.assertEqual([job.payload for job in jobs], [{"page": 1}, {"page": 2}, None])
        self.assertEqual(jobs[2].depends_on, (RENDERED, jobs[0].id, jobs[1].id))
        self.assertEqual(jobs[2].state, leasequeue.JobState.WAITING)

    def test_submit_batch_names_the_job_of_a_bad_argument_before_sending(self):
        cases = [
            ([{"queue": "q", "task": "t"}, {"queue": "q", "task": "t", "payload": "x" * 65535}], ValueError, r"^jobs\[1\]\.payload: is 65537 bytes"),
            ([{"queue": "q", "task": "t", "depends_on_refs": "p1"}], TypeError, r"^jobs\[0\]\.depends_on_refs: must be a list"),
            ([{"queue": "q", "task": "t", "refs": ["p1"]}], TypeError, r"^jobs\[0\]: got an unexpected keyword argument 'refs'"),
            ([{"queue": "q"}], TypeError, r"^jobs\[0\]: missing 1 required positional argument: 'task'"),
            ([("q", "t")], TypeError, r"^jobs\[0\]: must be a mapping"),
            ([], ValueError, r"^jobs: must be a list of 1\.\.500"),
        ]
        for jobs, error, message in cases:
            with self.assertRaisesRegex(error, message):
                self.client.submit_batch(jobs)
        self.assertEqual(self.fake.batches, [])


if __name__ == "__main__":
    unittest.main()
