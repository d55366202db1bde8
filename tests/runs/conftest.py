import pytest
from celery.signals import before_task_publish
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs.machine import tracing
from runs.models import AttentionReason, RunStatus, StepStatus
from tests.factories import new_run, place


@pytest.fixture
def spans():
    """Tracing on for this test, its spans kept in memory (the SDK's exporter)."""
    exporter = InMemorySpanExporter()
    tracing.use_provider(tracing.provider(SimpleSpanProcessor(exporter)))
    yield exporter
    tracing.use_provider(None)


@pytest.fixture
def task_run():
    """The task created last (a low-impact undo); the run waits for a person."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.SUCCEEDED})


@pytest.fixture
def ledger_run():
    """The ledger posted last (high impact, its undo paused for a person), the task before."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.PERMANENT_ERROR,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


@pytest.fixture
def hints():
    """The run ids of the wake-up hints published to the broker, read from Celery's
    before_task_publish as they go out."""
    sent = []

    def count(sender=None, body=None, headers=None, **kwargs):
        sent.append(int(headers["argsrepr"].strip("(),")))

    before_task_publish.connect(count, weak=False)
    yield sent
    before_task_publish.disconnect(count)
