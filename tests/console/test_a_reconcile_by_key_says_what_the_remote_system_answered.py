"""A reconcile that asks the remote system by the step's key says what it answered: the
effect is there (recorded as done), it is not (recorded as not done), or the system could
not tell (still unknown, the run still in attention). "Done" for all three would have a
person believe an effect settled that is not."""

import pytest
from django.urls import reverse

from runs.machine.errors import TransientError
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_run():
    return place(new_run(wake=False), status=RunStatus.ATTENTION,
                 attention_reason="unknown_outcome",
                 step_statuses={"create-task": StepStatus.UNKNOWN})


def _ask(client, run):
    return client.post(
        reverse("console:action", args=[run.pk, "reconcile"]),
        {"reason": "the tracker answers again", "step": "create-task", "mode": "ask",
         "seen": str(Run.objects.get(pk=run.pk).audit_seq)}, follow=True).content.decode()


def _step(run):
    return Step.objects.get(run=run, name="create-task")


def test_found_by_its_key_is_said_as_found(client_for, operator, unknown_run, script):
    script.effects[_step(unknown_run).idempotency_key] = "T-7"
    page = _ask(client_for(operator), unknown_run)
    assert ("Reconcile: the remote system has create-task under its key: it is recorded as "
            "done.") in page
    assert (_step(unknown_run).status, _step(unknown_run).remote_ref) == ("succeeded", "T-7")


def test_nothing_under_its_key_is_said_as_not_done(client_for, operator, unknown_run, script):
    page = _ask(client_for(operator), unknown_run)
    assert ("Reconcile: the remote system has nothing under the key of create-task: it is "
            "recorded as not done (failed).") in page
    assert _step(unknown_run).status == StepStatus.FAILED
    assert "Reconcile: done" not in page


def test_a_lookup_that_could_not_tell_says_the_outcome_is_still_unknown(
        client_for, operator, unknown_run, script):
    script.lookup_errors.append(TransientError("tracker timed out"))
    page = _ask(client_for(operator), unknown_run)
    assert ("Reconcile: the remote system could not tell whether create-task happened: its "
            "outcome is still unknown") in page
    assert "Reconcile: done" not in page
    assert script.reconcile_calls and _step(unknown_run).status == StepStatus.UNKNOWN
    assert Run.objects.get(pk=unknown_run.pk).status == RunStatus.ATTENTION
