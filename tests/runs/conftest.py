import pytest
from celery.signals import before_task_publish
from django.db import connection
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


class ClashOnce:
    """The database refuses one write as a clash with another session (a trigger raising
    SQLSTATE 40001, as a serializable session's commit refused is): the first write of
    `table`'s rows (`event`: UPDATE or INSERT) that `when` (a trigger condition on NEW and
    OLD) picks, once. The writes that follow are let through."""

    def __call__(self, table: str = "runs_toolcall", event: str = "UPDATE",
                 when: str = "TRUE") -> None:
        self.table = table
        with connection.cursor() as cursor:
            cursor.execute(f"""
CREATE SEQUENCE clash_once;
CREATE FUNCTION clash_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('clash_once') = 1 THEN
        RAISE EXCEPTION 'could not serialize access due to concurrent update'
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER clash_once BEFORE {event} ON {table}
    FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION clash_once();
""")

    def writes(self) -> int:
        """How many writes the trigger saw: the one refused and those let through."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                           "FROM clash_once")
            return cursor.fetchone()[0]

    def remove(self) -> None:
        with connection.cursor() as cursor:
            if getattr(self, "table", None):
                cursor.execute(f"DROP TRIGGER IF EXISTS clash_once ON {self.table}")
            cursor.execute("DROP FUNCTION IF EXISTS clash_once(); "
                           "DROP SEQUENCE IF EXISTS clash_once;")


@pytest.fixture
def clash_once():
    """clash_once(table, event, when) arms a ClashOnce; removed after the test."""
    clash = ClashOnce()
    try:
        yield clash
    finally:
        clash.remove()
