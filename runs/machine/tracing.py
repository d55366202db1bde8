"""OpenTelemetry traces: one trace per run, a span per step call, compensation, lookup by
key, tool call, model call and operator action, each with the workflow, business key,
idempotency key and attempt as attributes.

A run is carried out by many claims on many workers over hours or days, so no process can
hold a span open for the whole run. Its trace id is derived from the run (its id, workflow
and business key), and so is the id of the run's span, the parent of every span the run
makes: every worker's spans of one run land in one trace without any of them storing a
context. The run's own span is emitted when it starts.

Off by default: without a configured exporter the API's tracer is a no-op. With
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, spans go out over
OTLP/HTTP in batches (`configure`, called at start-up by runs.apps). A test installs its own
provider with an in-memory exporter.

The trace context of the current span goes out to receivers as `traceparent`
(`inject_headers`, an httpx request hook).
"""

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

TRACER_NAME = "durable-workflows"
_configured = False


def configure() -> bool:
    """Install the OTLP exporter if an endpoint is configured. Returns whether it did."""
    global _configured
    if _configured or not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                           or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    trace.set_tracer_provider(provider(BatchSpanProcessor(OTLPSpanExporter())))
    _configured = True
    return True


_own_provider: TracerProvider | None = None


def use_provider(chosen: TracerProvider | None) -> None:
    """Record spans through `chosen` in this process (None: back to the global provider).
    Tests install an in-memory exporter this way, for as long as they need it."""
    global _own_provider
    _own_provider = chosen


def enabled() -> bool:
    """Whether spans are recorded in this process (an SDK provider is installed)."""
    return _own_provider is not None or isinstance(trace.get_tracer_provider(), TracerProvider)


def tracer():
    # Asked each time: a provider installed later (a test's) is used from then on.
    if _own_provider is not None:
        return _own_provider.get_tracer(TRACER_NAME)
    return trace.get_tracer(TRACER_NAME)


def _ids(run_id: int, workflow: str, business_key: str) -> tuple[int, int]:
    digest = hashlib.sha256(f"run:{run_id}:{workflow}:{business_key}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def run_context(run) -> trace.Context:
    """The context whose parent is the run's span: every span of the run starts in it."""
    trace_id, span_id = _ids(run.pk, run.workflow_name, run.business_key)
    parent = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def run_attributes(run) -> dict:
    return {"workflow.name": run.workflow_name, "workflow.version": run.workflow_version,
            "run.id": run.pk, "run.business_key": run.business_key}


_next_ids: ContextVar[tuple[int, int] | None] = ContextVar("next_run_span_ids", default=None)


class RunIdGenerator(RandomIdGenerator):
    """Random ids, except for a run's own span, which gets the ids derived from the run
    (see run_started). The providers this module installs use it."""

    def generate_trace_id(self) -> int:
        ids = _next_ids.get()
        return ids[0] if ids else super().generate_trace_id()

    def generate_span_id(self) -> int:
        ids = _next_ids.get()
        return ids[1] if ids else super().generate_span_id()


def provider(*processors) -> TracerProvider:
    """A tracer provider with the run id generator and the given span processors."""
    made = TracerProvider(id_generator=RunIdGenerator(), resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "durable-workflows")}))
    for processor in processors:
        made.add_span_processor(processor)
    return made


def run_started(run) -> None:
    """The run's span: a short one at its start, bearing the ids every later span of the
    run names as its parent, so that backends show the run as the root of its trace."""
    if not enabled():
        return
    token = _next_ids.set(_ids(run.pk, run.workflow_name, run.business_key))
    try:
        span = tracer().start_span(f"run {run.workflow_name}", context=Context(),
                                   attributes=run_attributes(run), kind=SpanKind.INTERNAL)
    finally:
        _next_ids.reset(token)
    span.end()


@contextmanager
def run_span(name: str, run, *, attributes: dict | None = None,
             kind: SpanKind = SpanKind.INTERNAL) -> Iterator[trace.Span]:
    """A span of `run`'s trace, current for the block (so outgoing calls carry it). An
    exception leaving the block is recorded on the span and raised on."""
    if not enabled():
        yield trace.INVALID_SPAN
        return
    with tracer().start_as_current_span(
            name, context=run_context(run), kind=kind,
            attributes={**run_attributes(run), **(attributes or {})}) as span:
        yield span


@contextmanager
def step_span(ctx, *, kind: str, what: str = "step") -> Iterator[trace.Span]:
    """The span of one call of a step (or its compensation, or its lookup by key)."""
    if not enabled():
        # Off (the default): not even the ids are derived, the hot path pays nothing.
        yield trace.INVALID_SPAN
        return
    attributes = {"step.name": ctx.step, "step.kind": kind, "idempotency.key": ctx.key,
                  "attempt": ctx.attempt}
    with tracer().start_as_current_span(
            f"{what} {ctx.step}", context=_context_of(ctx), kind=SpanKind.CLIENT,
            attributes={"workflow.name": ctx.workflow, "run.id": ctx.run_id,
                        "run.business_key": ctx.business_key, **attributes}) as span:
        yield span


def _context_of(ctx) -> trace.Context:
    class _Run:  # the three fields the derived ids are made of
        pk, workflow_name, business_key = ctx.run_id, ctx.workflow, ctx.business_key

    return run_context(_Run)


def record_outcome(span: trace.Span, outcome) -> None:
    """Mark a step's span with its outcome: succeeded, or its error class and message."""
    if getattr(outcome, "succeeded", False):
        span.set_attribute("outcome", "succeeded")
        if getattr(outcome, "remote_ref", ""):
            span.set_attribute("remote.ref", outcome.remote_ref)
        return
    error = getattr(outcome, "error", None)
    if error is not None:
        span.set_attribute("outcome", str(error.error_class))
        span.set_attribute("error.class", str(error.error_class))
        span.set_status(Status(StatusCode.ERROR, error.message[:500]))


def record_verdict(span: trace.Span, verdict, error: str = "") -> None:
    span.set_attribute("lookup.verdict", type(verdict).__name__ if verdict else "none")
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:500]))


def event(name: str, run, *, attributes: dict | None = None, error: str = "") -> None:
    """A span with no duration of its own for something the runtime did to a run (a lease
    taken back from a dead worker, an operator's action)."""
    with run_span(name, run, attributes=attributes) as span:
        if error:
            span.set_status(Status(StatusCode.ERROR, error[:500]))


def inject_headers(request) -> None:
    """httpx request hook: the current span's context goes out as `traceparent`."""
    carrier: dict[str, str] = {}
    inject(carrier)
    for name, value in carrier.items():
        request.headers.setdefault(name, value)
