"""OpenTelemetry in the SDK (leasequeue._tracing): attempt spans and the producer's trace context, offline.

By default these tests run against a stand-in of the OpenTelemetry Python API
(otel_api_standin/, see its README.md), not the real `opentelemetry-api`
package: Debian 12 does not package it and PyPI is not reachable from the
machines the tests run on. The stand-in reproduces the part of the API the SDK
uses, with its module paths, names, signatures and abstract methods; a
recording TracerProvider below plays the part of an application's SDK. With
LEASEQUEUE_OTEL_API_PATH naming a directory that holds the real package (e.g.
`pip install --target DIR opentelemetry-api`), the same tests run against it
instead. The last class runs the worker and the client with the package made
unimportable, as on a machine without it.
"""

import asyncio
import contextlib
import importlib
import os
import random
import sys
import threading
import unittest

import leasequeue
from fake_server import TIMEOUT, FakeServer, lease
from leasequeue import _tracing

STANDIN = os.environ.get("LEASEQUEUE_OTEL_API_PATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "otel_api_standin")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
ATTRIBUTES = {"messaging.system", "messaging.destination.name", "messaging.message.id", "messaging.operation.type",
              "messaging.operation.name", "leasequeue.job.id", "leasequeue.job.task", "leasequeue.job.attempt",
              "leasequeue.worker.id"}


def forget_opentelemetry():
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        del sys.modules[name]


def with_opentelemetry(test):
    """Puts the stand-in (or LEASEQUEUE_OTEL_API_PATH) first on sys.path and reloads leasequeue._tracing over it; undone at cleanup."""
    forget_opentelemetry()
    sys.path.insert(0, STANDIN)
    importlib.reload(_tracing)

    def undo():
        sys.path.remove(STANDIN)
        forget_opentelemetry()
        importlib.reload(_tracing)

    test.addCleanup(undo)
    from opentelemetry import trace

    provider = recording_provider(trace)
    trace.set_tracer_provider(provider)
    return trace, provider


def recording_provider(trace):
    """A TracerProvider that keeps every span it makes, as an SDK with an in-memory exporter would."""

    class RecordingSpan(trace.Span):
        def __init__(self, provider, name, context, parent, kind, attributes, links, scope):
            self.provider = provider
            self.name, self.context, self.parent, self.kind, self.scope = name, context, parent, kind, scope
            self.attributes = dict(attributes or {})
            self.links = list(links or ())
            self.status = trace.Status(trace.StatusCode.UNSET)
            self.exceptions = []
            self.ended = False

        def get_span_context(self):
            return self.context

        def set_attributes(self, attributes):
            self.attributes.update(attributes)

        def set_attribute(self, key, value):
            self.attributes[key] = value

        def add_event(self, name, attributes=None, timestamp=None):
            pass

        def update_name(self, name):
            self.name = name

        def is_recording(self):
            return not self.ended

        def set_status(self, status, description=None):
            self.status = status if isinstance(status, trace.Status) else trace.Status(status, description)

        def record_exception(self, exception, attributes=None, timestamp=None, escaped=False):
            self.exceptions.append(exception)

        def end(self, end_time=None):
            with self.provider.lock:
                self.ended = True
                self.provider.lock.notify_all()

    class Tracer(trace.Tracer):
        def __init__(self, provider, scope):
            self.provider, self.scope = provider, scope

        def start_span(self, name, context=None, kind=trace.SpanKind.INTERNAL, attributes=None, links=None,
                       start_time=None, record_exception=True, set_status_on_exception=True):
            parent = trace.get_current_span(context).get_span_context()
            trace_id = parent.trace_id if parent.is_valid else random.getrandbits(128)
            own = trace.SpanContext(trace_id, random.getrandbits(64) or 1, False, trace.TraceFlags(1),
                                    parent.trace_state if parent.is_valid else None)
            if self.provider.broken:
                raise RuntimeError("the exporter's queue is full")
            span = RecordingSpan(self.provider, name, own, parent if parent.is_valid else None, kind, attributes, links, self.scope)
            with self.provider.lock:
                self.provider.spans.append(span)
            return span

        @contextlib.contextmanager
        def start_as_current_span(self, name, context=None, kind=trace.SpanKind.INTERNAL, attributes=None, links=None,
                                  start_time=None, record_exception=True, set_status_on_exception=True,
                                  end_on_exit=True):
            span = self.start_span(name, context, kind, attributes, links, start_time)
            with trace.use_span(span, end_on_exit=end_on_exit):
                yield span

    class Provider(trace.TracerProvider):
        def __init__(self):
            self.lock = threading.Condition()  # notified as a span ends
            self.spans = []
            self.broken = False  # set: every span fails to start, as a misbehaving SDK's might

        def get_tracer(self, instrumenting_module_name, instrumenting_library_version=None, schema_url=None, attributes=None):
            return Tracer(self, instrumenting_module_name)

        def named(self, name):
            with self.lock:
                return [s for s in self.spans if s.name == name]

        def wait_ended(self, name, n):
            """Waits until `n` spans named `name` have ended (the worker ends an attempt's span
            after it queued the outcome, so the outcome's arrival does not mean the span ended)."""

            def ended():
                return sum(1 for s in self.spans if s.name == name and s.ended)

            with self.lock:
                if not self.lock.wait_for(lambda: ended() >= n, TIMEOUT):
                    raise AssertionError(f"{ended()} of {n} spans {name!r} ended after {TIMEOUT}s")

    return Provider()


def run_worker(test, leases, register, **options):
    """Runs a worker over `leases` until each has an outcome; returns {job id: acknowledgement}."""
    fake = FakeServer(leases)
    test.addCleanup(fake.close)
    worker = leasequeue.Worker(fake.target, queue="q", concurrency=4, worker_id="unit-t", handle_signals=False, **options)
    register(worker)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    outcomes = {a.job_id: a for _, a in fake.wait_for_outcomes(len(leases))}
    worker.stop()
    thread.join(TIMEOUT)
    test.assertFalse(thread.is_alive())
    return outcomes


class AttemptSpans(unittest.TestCase):
    def setUp(self):
        self.trace, self.provider = with_opentelemetry(self)
        self.seen = {}  # task -> (current span inside the handler, a span the handler opened)

    def run_worker(self, leases, register, **options):
        """run_worker, then the wait for each attempt's span to end."""
        outcomes = run_worker(self, leases, register, **options)
        self.provider.wait_ended("process q", len(leases))
        return outcomes

    def register(self, worker):
        trace, seen = self.trace, self.seen

        def record(job):
            inner = trace.get_tracer("app").start_span("inner")
            inner.end()
            seen[job.task] = (trace.get_current_span(), inner)

        @worker.task("ok")
        def ok(job):
            record(job)
            return "done"

        @worker.task("async")
        async def async_ok(job):
            await asyncio.sleep(0.01)
            record(job)
            return "done"

        @worker.task("boom")
        def boom(job):
            raise RuntimeError("it broke")

        @worker.task("never")
        def never(job):
            raise leasequeue.Permanent("bad input")

        @worker.task("later")
        def later(job):
            job.snooze(2)

    def test_each_attempt_is_a_consumer_span_child_of_the_jobs_context_with_the_handler_inside(self):
        context = {"traceparent": TRACEPARENT, "tracestate": "shop=checkout"}
        ok, async_job, plain = lease("ok", attempts=2, trace_context=context), lease("async", trace_context=context), lease("ok")
        outcomes = self.run_worker([ok, async_job], self.register)
        self.assertEqual({a.WhichOneof("outcome") for a in outcomes.values()}, {"complete"})
        spans = {s.attributes["messaging.message.id"]: s for s in self.provider.named("process q")}
        self.assertEqual(set(spans), {ok.job.id, async_job.job.id})
        span = spans[ok.job.id]
        self.assertEqual(span.scope, "leasequeue-worker")
        self.assertIs(span.kind, self.trace.SpanKind.CONSUMER)
        self.assertEqual(set(span.attributes), ATTRIBUTES | {"leasequeue.attempt.outcome"})
        self.assertEqual(
            {k: span.attributes[k] for k in ("messaging.system", "messaging.destination.name", "messaging.operation.type",
                                              "messaging.operation.name", "leasequeue.job.id", "leasequeue.job.task",
                                              "leasequeue.job.attempt", "leasequeue.worker.id", "leasequeue.attempt.outcome")},
            {"messaging.system": "leasequeue", "messaging.destination.name": "q", "messaging.operation.type": "process",
             "messaging.operation.name": "process", "leasequeue.job.id": ok.job.id, "leasequeue.job.task": "ok",
             "leasequeue.job.attempt": 2, "leasequeue.worker.id": "unit-t", "leasequeue.attempt.outcome": "complete"},
        )
        for job in (ok, async_job):
            span = spans[job.job.id]
            self.assertTrue(span.ended)
            self.assertEqual(span.links, [])
            self.assertEqual((f"{span.parent.trace_id:032x}", f"{span.parent.span_id:016x}"), (TRACE_ID, PARENT_ID))
            self.assertTrue(span.parent.is_remote)
            self.assertEqual(span.parent.trace_state.to_header(), "shop=checkout")
            self.assertEqual(f"{span.context.trace_id:032x}", TRACE_ID)
            self.assertIs(span.status.status_code, self.trace.StatusCode.UNSET)
        # The handlers ran with their attempt's span current: what they opened is its child.
        current, inner = self.seen["ok"]
        self.assertIs(current, spans[ok.job.id])
        self.assertEqual(inner.parent, spans[ok.job.id].context)
        current, inner = self.seen["async"]
        self.assertIs(current, spans[async_job.job.id])
        self.assertEqual(inner.parent, spans[async_job.job.id].context)
        self.assertEqual(plain.job.trace_context, {})

    def test_a_job_without_trace_context_starts_a_new_trace(self):
        job = lease("ok")
        self.run_worker([job], self.register)
        (span,) = self.provider.named("process q")
        self.assertIsNone(span.parent)
        self.assertEqual(span.links, [])
        self.assertEqual(span.attributes["messaging.message.id"], job.job.id)

    def test_failures_have_the_error_status_and_a_snooze_does_not(self):
        boom, never, later = (lease(t, trace_context={"traceparent": TRACEPARENT}) for t in ("boom", "never", "later"))
        outcomes = self.run_worker([boom, never, later], self.register)
        self.assertEqual(outcomes[later.job.id].WhichOneof("outcome"), "snooze")
        spans = {s.attributes["leasequeue.job.task"]: s for s in self.provider.named("process q")}
        E = self.trace.StatusCode.ERROR
        self.assertEqual((spans["boom"].status.status_code, spans["boom"].status.description), (E, "it broke"))
        self.assertEqual(spans["boom"].attributes["leasequeue.attempt.outcome"], "fail")
        self.assertNotIn("leasequeue.attempt.permanent", spans["boom"].attributes)
        self.assertEqual((spans["never"].status.status_code, spans["never"].status.description), (E, "bad input"))
        self.assertIs(spans["never"].attributes["leasequeue.attempt.permanent"], True)
        self.assertIs(spans["later"].status.status_code, self.trace.StatusCode.UNSET)
        self.assertEqual(spans["later"].attributes["leasequeue.attempt.outcome"], "snooze")
        # The outcome sets the status, not the exception passing through the span.
        self.assertEqual([s.exceptions for s in spans.values()], [[], [], []])
        self.assertTrue(all(s.ended for s in spans.values()))

    def test_a_task_without_handler_is_a_failed_span(self):
        job = lease("nobody", trace_context={"traceparent": TRACEPARENT})
        self.run_worker([job], self.register)
        (span,) = self.provider.named("process q")
        self.assertIs(span.status.status_code, self.trace.StatusCode.ERROR)
        self.assertIn("no handler for task 'nobody'", span.status.description)

    def test_trace_link_starts_a_new_trace_linked_to_the_jobs_context(self):
        job = lease("ok", trace_context={"traceparent": TRACEPARENT, "tracestate": "shop=checkout"})
        self.run_worker([job], self.register, trace_link=True)
        (span,) = self.provider.named("process q")
        self.assertIsNone(span.parent)
        self.assertNotEqual(f"{span.context.trace_id:032x}", TRACE_ID)
        (link,) = span.links
        self.assertEqual((f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}"), (TRACE_ID, PARENT_ID))
        self.assertEqual(link.context.trace_state.to_header(), "shop=checkout")
        current, inner = self.seen["ok"]
        self.assertIs(current, span)
        self.assertEqual(inner.parent, span.context)

    def test_trace_link_without_a_context_is_a_plain_root(self):
        self.run_worker([lease("ok")], self.register, trace_link=True)
        (span,) = self.provider.named("process q")
        self.assertIsNone(span.parent)
        self.assertEqual(span.links, [])

    def test_a_malformed_trace_context_is_ignored(self):
        self.run_worker([lease("ok", trace_context={"traceparent": "00-" + "0" * 32 + f"-{PARENT_ID}-01"})], self.register)
        (span,) = self.provider.named("process q")
        self.assertIsNone(span.parent)

    def test_a_tracer_that_raises_costs_the_span_not_the_job(self):
        self.provider.broken = True

        def register(worker):
            self.register(worker)

            @worker.task("quiet")  # opens no span of its own (those of "ok" and "async" would raise in the handler)
            def quiet(job):
                return {"ok": True}

            @worker.task("quiet-async")
            async def quiet_async(job):
                return None

        jobs = [lease("quiet", trace_context={"traceparent": TRACEPARENT}), lease("quiet-async"), lease("boom")]
        with self.assertLogs("leasequeue.worker", "WARNING") as logs:
            outcomes = run_worker(self, jobs, register)
        self.assertEqual([outcomes[j.job.id].WhichOneof("outcome") for j in jobs], ["complete", "complete", "fail"])
        self.assertEqual(self.provider.named("process q"), [])
        self.assertTrue(any("the attempt's span did not start" in line for line in logs.output), logs.output)

    def test_trace_link_must_be_a_bool(self):
        with self.assertRaisesRegex(TypeError, "^trace_link:"):
            leasequeue.Worker("http://127.0.0.1:1", queue="q", trace_link="yes")


class SubmitCarriesTheCurrentContext(unittest.TestCase):
    def setUp(self):
        self.trace, self.provider = with_opentelemetry(self)
        self.fake = FakeServer()
        self.addCleanup(self.fake.close)
        self.client = leasequeue.Client(self.fake.target)
        self.addCleanup(self.client.close)

    def test_the_current_span_goes_as_trace_context(self):
        parent = self.trace.NonRecordingSpan(
            self.trace.SpanContext(int(TRACE_ID, 16), int(PARENT_ID, 16), True, self.trace.TraceFlags(1),
                                   self.trace.TraceState([("shop", "checkout")]))
        )
        span = self.trace.get_tracer("app").start_span("request", context=self.trace.set_span_in_context(parent))
        with self.trace.use_span(span, end_on_exit=True):
            self.client.submit("q", "t", None)
            self.client.submit("q", "t", None, trace_context={})
            self.client.submit("q", "t", None, trace_context={"traceparent": TRACEPARENT})
        self.client.submit("q", "t", None)
        first, empty, given, outside = (dict(r.trace_context) for r in self.fake.submits)
        self.assertEqual(first, {"traceparent": f"00-{TRACE_ID}-{span.context.span_id:016x}-01", "tracestate": "shop=checkout"})
        self.assertEqual(empty, {})
        self.assertEqual(given, {"traceparent": TRACEPARENT})
        self.assertEqual(outside, {})

    def test_a_bad_trace_context_is_refused_before_sending(self):
        with self.assertRaisesRegex(ValueError, "^trace_context: unknown key 'baggage'"):
            self.client.submit("q", "t", None, trace_context={"baggage": "x"})
        with self.assertRaisesRegex(TypeError, "^trace_context:"):
            self.client.submit("q", "t", None, trace_context={"traceparent": 1})
        self.assertEqual(self.fake.submits, [])


class WithoutOpenTelemetry(unittest.TestCase):
    """The package is not importable (a None in sys.modules makes `import opentelemetry` fail)."""

    def setUp(self):
        forget_opentelemetry()
        sys.modules["opentelemetry"] = None
        importlib.reload(_tracing)

        def undo():
            del sys.modules["opentelemetry"]
            importlib.reload(_tracing)

        self.addCleanup(undo)

    def test_the_worker_and_the_client_run_unchanged(self):
        self.assertFalse(_tracing.ENABLED)
        context = {"traceparent": TRACEPARENT}
        ok, boom = lease("ok", 4, trace_context=context), lease("boom", trace_context=context)
        seen = []

        def register(worker):
            @worker.task("ok")
            def ok_handler(job):
                seen.append(job.trace_context)
                return job.payload + 1

            @worker.task("boom")
            def boom_handler(job):
                raise RuntimeError("it broke")

        outcomes = run_worker(self, [ok, boom], register)
        self.assertEqual(outcomes[ok.job.id].complete.result.number_value, 5)
        self.assertEqual(outcomes[boom.job.id].fail.error, "it broke")
        self.assertEqual(seen, [context])
        fake = FakeServer()
        self.addCleanup(fake.close)
        with leasequeue.Client(fake.target) as client:
            client.submit("q", "t", None)
            client.submit("q", "t", None, trace_context=context)
        self.assertEqual([dict(r.trace_context) for r in fake.submits], [{}, context])
        self.assertEqual([n for n in sys.modules if n.startswith("opentelemetry.")], [])


if __name__ == "__main__":
    unittest.main()
