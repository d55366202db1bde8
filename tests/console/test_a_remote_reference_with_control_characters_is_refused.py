"""The remote reference a person gives when settling a step or a tool call as found is shown
on one line (the run page, show_run, the audit record): a line break in it would forge a
line. Control characters are refused there by the rule business keys follow
(runs.machine.storable.has_control_characters), on every path (act, which the console, the
API and the CLI call), naming the field, and nothing is written."""

import io

import pytest
from django.core.management import CommandError, call_command

from approvals.operator_actions import ActionInputError, act
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_run(db):
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.UNKNOWN})


def _state(run):
    run = Run.objects.get(pk=run.pk)
    task = step(run, "create-task")
    return (run.status, run.audit_seq, task.status, task.remote_ref,
            AuditRecord.objects.filter(run=run).count())


def _found(ref: str) -> ActionInput:
    return ActionInput(reason="seen in the tracker", step="create-task", mode="found",
                       remote_ref=ref, evidence="tracker shows it")


@pytest.mark.parametrize("ref", ["REF\nforged", "REF\rforged", "REF\x00", "REF\tX",
                                 "REF\x85X", "REF\u2028X", "REF\u202eX"])
def test_act_refuses_a_remote_reference_with_a_control_character(operator, unknown_run, ref):
    before = _state(unknown_run)
    # A NUL is named as in every field (no record can keep one).
    said = "NUL characters cannot be stored" if "\x00" in ref else "control characters"
    with pytest.raises(ActionInputError, match=f"remote reference: {said}"):
        act("reconcile", unknown_run.pk, user=operator, given=_found(ref))
    assert _state(unknown_run) == before


def test_the_cli_refuses_it_naming_the_field(operator, unknown_run):
    before = _state(unknown_run)
    with pytest.raises(CommandError, match="remote reference: control characters"):
        call_command("run_action", str(unknown_run.pk), "reconcile", "--user", "olga",
                     "--reason", "seen", "--step", "create-task", "--mode", "found",
                     "--remote-ref", "REF\nforged", "--evidence", "tracker",
                     stdout=io.StringIO())
    assert _state(unknown_run) == before


def test_a_plain_reference_is_taken(operator, unknown_run):
    act("reconcile", unknown_run.pk, user=operator, given=_found("  TASK-17 "))
    assert step(Run.objects.get(pk=unknown_run.pk), "create-task").remote_ref == "TASK-17"
