import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs.machine import tracing


@pytest.fixture
def spans():
    """Tracing on for this test, its spans kept in memory (the SDK's exporter)."""
    exporter = InMemorySpanExporter()
    tracing.use_provider(tracing.provider(SimpleSpanProcessor(exporter)))
    yield exporter
    tracing.use_provider(None)
