"""An undo a person's end of its run stopped says so in its error class, never only in its
message: ended_in_doubt (in flight then: its sender's late answer settles it) and
ended_undoing (an agent step's, its calls undone only so far: the step's own late success
settles it). A failed undo whose error text reads like the end's sentence is still a failed
undo, which no late answer moves; rows written before the class existed are given it by
the migration, and only those."""

from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.utils import timezone

from runs.agent_models import ToolCall
from runs.machine.transitions.in_flight import (
    ENDED_BEFORE_UNDONE,
    IN_FLIGHT_AT_END,
    undo_in_doubt_at_end,
    undo_stopped_by_end,
)
from runs.models import ErrorClass, Step, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
FAILED = StepStatus.COMPENSATION_FAILED


def row(error_class: str, message: str, status: str = FAILED) -> Step:
    return Step(status=status, error_class=error_class, error_message=message)


def test_an_undo_in_flight_at_the_end_is_known_by_its_class_whatever_its_message_says():
    assert undo_in_doubt_at_end(row(ErrorClass.ENDED_IN_DOUBT, IN_FLIGHT_AT_END))
    assert undo_in_doubt_at_end(row(ErrorClass.ENDED_IN_DOUBT, "shortened for a report"))
    assert undo_stopped_by_end(row(ErrorClass.ENDED_IN_DOUBT, ""))
    assert undo_stopped_by_end(row(ErrorClass.ENDED_UNDOING, ""))
    # The end left it so, and it moved on since: compensated, or compensating again.
    assert not undo_in_doubt_at_end(row(ErrorClass.ENDED_IN_DOUBT, "", StepStatus.COMPENSATED))
    assert not undo_stopped_by_end(row(ErrorClass.ENDED_UNDOING, "", StepStatus.COMPENSATING))


def test_a_failed_undo_whose_error_text_reads_like_the_ends_sentence_is_a_failed_undo():
    # A remote system's error text is its own: it never makes an undo one a late answer
    # settles.
    assert not undo_in_doubt_at_end(row(ErrorClass.UNKNOWN, IN_FLIGHT_AT_END))
    assert not undo_stopped_by_end(row(ErrorClass.UNKNOWN, IN_FLIGHT_AT_END))
    assert not undo_stopped_by_end(row(ErrorClass.PERMANENT, ENDED_BEFORE_UNDONE))
    assert not undo_stopped_by_end(row("", ENDED_BEFORE_UNDONE))


def test_the_migration_gives_rows_written_before_it_their_class_and_no_other_row():
    migration = import_module("runs.migrations.0045_error_class_ended")
    run = new_run("test-orders")
    names = list(Step.objects.filter(run=run).order_by("position")
                 .values_list("name", flat=True))
    assert len(names) >= 3
    in_doubt, part_undone, failed_so = names[:3]
    Step.objects.filter(run=run, name=in_doubt).update(
        status=FAILED, error_class=ErrorClass.UNKNOWN, error_message=IN_FLIGHT_AT_END)
    Step.objects.filter(run=run, name=part_undone).update(
        status=FAILED, error_class="", error_message=ENDED_BEFORE_UNDONE)
    # Failed by its own error of the same class: not one the end stopped.
    Step.objects.filter(run=run, name=failed_so).update(
        status=FAILED, error_class=ErrorClass.UNKNOWN, error_message="timed out")
    call = ToolCall.objects.create(
        step=step(run, in_doubt), turn=0, index=0, call_id="c0", tool="write-note",
        args_hash="h", idempotency_key="k", status=FAILED, error_class=ErrorClass.UNKNOWN,
        error_message=IN_FLIGHT_AT_END, updated_at=timezone.now())
    untouched = {s.pk: (s.status, s.error_class, s.error_message)
                 for s in Step.objects.exclude(run=run)}

    editor = SimpleNamespace(connection=connection)
    migration.classify(django_apps, editor)

    def classes():
        return {name: step(run, name).error_class for name in names[:3]}

    assert classes() == {in_doubt: ErrorClass.ENDED_IN_DOUBT,
                         part_undone: ErrorClass.ENDED_UNDOING,
                         failed_so: ErrorClass.UNKNOWN}
    call.refresh_from_db()
    assert call.error_class == ErrorClass.ENDED_IN_DOUBT
    assert step(run, in_doubt).error_message == IN_FLIGHT_AT_END  # the message is kept
    assert {s.pk: (s.status, s.error_class, s.error_message)
            for s in Step.objects.exclude(run=run)} == untouched

    migration.unclassify(django_apps, editor)
    assert classes() == {in_doubt: ErrorClass.UNKNOWN, part_undone: "",
                         failed_so: ErrorClass.UNKNOWN}
    call.refresh_from_db()
    assert call.error_class == ErrorClass.UNKNOWN
