"""The Client and the wire helpers, offline (fake_server.py for calls)."""

import datetime
import unittest

import leasequeue
from fake_server import FakeServer
from leasequeue import _backoff, _channel, _wire
from leasequeue.v1 import leasequeue_pb2 as pb


class ClientCalls(unittest.TestCase):
    def setUp(self):
        self.fake = FakeServer()
        self.addCleanup(self.fake.close)
        self.client = leasequeue.Client(self.fake.target)
        self.addCleanup(self.client.close)

    def test_submit_sends_every_option(self):
        job = self.client.submit(
            "emails", "welcome", {"user": 42, "tags": ["a"]}, idempotency_key="k-1", priority=5, max_attempts=7, delay=datetime.timedelta(seconds=90)
        )
        request = self.fake.submits[0]
        self.assertEqual((request.queue, request.task, request.idempotency_key, request.priority, request.max_attempts), ("emails", "welcome", "k-1", 5, 7))
        self.assertEqual(request.delay.seconds, 90)
        self.assertEqual(job.payload, {"user": 42, "tags": ["a"]})
        self.assertEqual(job.state, leasequeue.JobState.QUEUED)

    def test_refuses_what_the_server_would_refuse_before_sending(self):
        with self.assertRaisesRegex(ValueError, "^max_attempts:"):
            self.client.submit("q", "t", None, max_attempts=0)
        with self.assertRaisesRegex(ValueError, "^delay:"):
            self.client.submit("q", "t", None, delay=31 * 24 * 3600)
        with self.assertRaisesRegex(ValueError, "^payload: is 65537 bytes"):
            self.client.submit("q", "t", "x" * 65535)
        with self.assertRaisesRegex(ValueError, "^payload: is not a JSON value"):
            self.client.submit("q", "t", {"when": datetime.datetime.now()})
        self.assertEqual(self.fake.submits, [])

    def test_group_key_is_sent_when_the_api_has_it_and_refused_otherwise(self):
        if "group_key" in pb.SubmitRequest.DESCRIPTOR.fields_by_name:
            self.client.submit("q", "t", None, group_key="tenant-1")
            self.assertEqual(self.fake.submits[0].group_key, "tenant-1")
        else:
            with self.assertRaisesRegex(ValueError, "^group_key:"):
                self.client.submit("q", "t", None, group_key="tenant-1")

    def test_wait_job_refuses_a_timeout_past_15_minutes_before_sending(self):
        with self.assertRaisesRegex(ValueError, "^timeout:"):
            self.client.wait_job("01a2333f-b290-70e5-84f8-95d52c11d916", timeout=15 * 60 + 1)
        with self.assertRaisesRegex(ValueError, "^timeout:"):
            self.client.wait_job("01a2333f-b290-70e5-84f8-95d52c11d916", timeout=-1)

    def test_get_job(self):
        job = self.client.get_job("01a2333f-b290-70e5-84f8-95d52c11d916")
        self.assertEqual((job.state, job.result, job.attempts), (leasequeue.JobState.COMPLETED, 7, 1))


class Wire(unittest.TestCase):
    def test_values_round_trip_with_whole_numbers_as_int(self):
        value = {"a": 1, "b": 1.5, "c": [True, None, "x"], "d": {}}
        self.assertEqual(_wire.from_value(_wire.to_value(value)), value)
        self.assertIsInstance(_wire.from_value(_wire.to_value(3)), int)

    def test_depth_is_counted_as_the_server_counts_it(self):
        self.assertEqual(_wire.json_depth(1), 0)
        self.assertEqual(_wire.json_depth([1]), 1)
        self.assertEqual(_wire.json_depth({"a": [{}]}), 3)
        deep = 0
        for _ in range(33):
            deep = [deep]
        with self.assertRaisesRegex(ValueError, "nested more than 32"):
            _wire.checked_json(deep, "result", _wire.MAX_JSON_BYTES)

    def test_job_states_match_the_proto(self):
        for state in leasequeue.JobState:
            self.assertEqual(pb.JobState.Name(state.value), f"JOB_STATE_{state.name}")

    def test_truncates_error_text(self):
        self.assertEqual(len(_wire.truncate("x" * 5000)), 4096)


class Targets(unittest.TestCase):
    def test_parse_target(self):
        self.assertEqual(_channel.parse_target("http://127.0.0.1:8080"), ("127.0.0.1:8080", False))
        self.assertEqual(_channel.parse_target("https://queue.internal:8443"), ("queue.internal:8443", True))
        self.assertEqual(_channel.parse_target("localhost:8080"), ("localhost:8080", False))
        for bad in ("", "ftp://x:1", "http://x:1/path"):
            with self.subTest(bad=bad), self.assertRaisesRegex(ValueError, "^target:"):
                _channel.parse_target(bad)

    def test_tokens_in_clear_only_to_loopback(self):
        self.assertFalse(_channel.sent_in_clear("127.0.0.1:8080", False))
        self.assertTrue(_channel.sent_in_clear("10.0.0.5:8080", False))
        self.assertFalse(_channel.sent_in_clear("10.0.0.5:8080", True))

    def test_backoff_is_jittered_within_half_to_full_cap(self):
        self.assertEqual(_backoff.backoff_delay(0, rand=lambda: 0), 0.125)
        self.assertEqual(_backoff.backoff_delay(0, rand=lambda: 1), 0.25)
        self.assertEqual(_backoff.backoff_delay(40, rand=lambda: 1), 30.0)


if __name__ == "__main__":
    unittest.main()
