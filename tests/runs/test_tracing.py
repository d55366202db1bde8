"""Traces: one trace per run, a span per step call, lookup, lease taken back and operator
action, with the workflow, business key, idempotency key and attempt as attributes; the
trace context goes out to receivers as traceparent. Checked with the SDK's in-memory
exporter on a run that crashes mid-step and retries."""

import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.utils import timezone
from opentelemetry.trace import StatusCode

from audit.chain import Actor
from runs.execution import executor, sweeper
from runs.machine import tracing, transitions
from runs.machine.errors import TransientError
from runs.models import RunStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step
from tests.processes import manage

pytestmark = pytest.mark.django_db


def test_one_trace_per_run_with_a_crash_and_a_retry(spans, script):
    run = new_run()
    # A worker records the intent of the first step and dies before its call ends: its
    # span is never exported, as with a real SIGKILL.
    lease = transitions.claim_run(run.pk, worker="doomed")
    assert lease.work.name == "fetch"
    # The sweeper takes the run back once the lease ran out.
    assert sweeper.sweep(now=timezone.now() + timedelta(hours=1)).expired == 1
    # The next worker settles the unknown read, sends it again, meets a 503, retries.
    script.plan["fetch"] = [TransientError("503 from the invoice source")]
    executor.advance_run(run.pk, worker="w2")
    time.sleep(0.1)
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.COMPLETED

    finished = spans.get_finished_spans()
    trace_ids = {s.context.trace_id for s in finished}
    assert len(trace_ids) == 1                       # one trace for the whole run
    root = next(s for s in finished if s.name == "run test-orders")
    assert root.parent is None
    assert all(s.parent.span_id == root.context.span_id for s in finished if s is not root)
    for s in finished:
        assert s.attributes["run.business_key"] == run.business_key
        assert s.attributes["workflow.name"] == "test-orders"

    expired = next(s for s in finished if s.name == "lease expired")
    assert expired.status.status_code == StatusCode.ERROR
    fetches = [s for s in finished if s.name == "step fetch"]
    assert [(s.attributes["attempt"], s.attributes["outcome"]) for s in fetches] == [
        (2, "transient"), (3, "succeeded")]
    assert fetches[0].status.status_code == StatusCode.ERROR
    assert "503" in fetches[0].status.description
    assert {s.attributes["idempotency.key"] for s in fetches} == {
        step(run, "fetch").idempotency_key}
    order = [s.name for s in sorted(finished, key=lambda s: s.start_time)]
    assert order.index("lease expired") < order.index("step fetch")
    assert [n for n in order if n.startswith("step ")] == [
        "step fetch", "step fetch", "step classify", "step create-task", "step post-ledger"]
    task = next(s for s in finished if s.name == "step create-task")
    assert task.attributes["idempotency.key"] == step(run, "create-task").idempotency_key
    assert task.attributes["remote.ref"] == step(run, "create-task").remote_ref


def test_an_operator_action_is_a_span_of_the_runs_trace(spans):
    run = new_run()
    ACTIONS["terminate"].perform(run.pk, actor=Actor(kind="user", label="olga"),
                                 given=ActionInput(reason="duplicate order"))
    action = next(s for s in spans.get_finished_spans() if s.name == "operator terminate")
    root = next(s for s in spans.get_finished_spans() if s.name == "run test-orders")
    assert action.context.trace_id == root.context.trace_id
    assert action.attributes["operator.actor"] == "olga"
    assert action.attributes["operator.reason"] == "duplicate order"


def test_traceparent_goes_out_to_the_receiver_from_the_step_span(spans):
    seen = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.update(self.headers.items())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    run = new_run()
    # The fields of a StepContext a step span reads.
    ctx = type("Ctx", (), {"step": "create-task", "key": "k-1", "attempt": 1,
                           "workflow": run.workflow_name, "run_id": run.pk,
                           "business_key": run.business_key})()
    try:
        with tracing.step_span(ctx, kind="write") as span, httpx.Client(
                event_hooks={"request": [tracing.inject_headers]}) as client:
            client.post(f"http://127.0.0.1:{server.server_address[1]}/tasks", json={})
    finally:
        server.shutdown()
    version, trace_id, parent_id, flags = seen["traceparent"].split("-")
    assert int(trace_id, 16) == span.get_span_context().trace_id
    assert int(parent_id, 16) == span.get_span_context().span_id
    assert flags == "01"


def test_tracing_is_off_by_default():
    assert not tracing.enabled()
    assert tracing.configure() is False              # no OTLP endpoint configured


def test_a_steps_lookup_by_key_is_a_span_with_its_verdict(spans, script):
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    (lookup,) = [s for s in spans.get_finished_spans() if s.name == "lookup create-task"]
    assert lookup.attributes["idempotency.key"] == step(run, "create-task").idempotency_key
    assert lookup.attributes["lookup.verdict"] == "Found"
    assert script.reconcile_calls == [("create-task", step(run, "create-task").idempotency_key)]


def test_with_an_endpoint_configured_spans_are_exported_over_otlp(tmp_path):
    """A process started with OTEL_EXPORTER_OTLP_ENDPOINT sends its spans to the collector
    there (OTLP over HTTP, protobuf), here a real HTTP server of the test."""
    received = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        process = manage("shell", "-c",
                         "from opentelemetry import trace; from runs.machine import tracing; "
                         "assert tracing.enabled(); "
                         "span = tracing.tracer().start_span('otlp-check'); span.end(); "
                         "trace.get_tracer_provider().shutdown()",
                         OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_port}",
                         OTEL_SERVICE_NAME="otlp-test")
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    finally:
        server.shutdown()
    assert len(received) == 1
    path, content_type, body = received[0]
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert b"otlp-check" in body and b"otlp-test" in body
