"""Resume lets a run go on from its checkpoint; for a run that waits at a step for an event
or a timer, that checkpoint is the wait itself. Resume says so, and what ends that wait,
where it said "done" as if the run were on its way; a run waiting for a retry after a
backoff is resumed as before. A run waiting for a person's approval is not resumed at all:
its approval request decides it (tests/runs/test_a_run_waiting_for_a_persons_approval_is_
neither_offered_nor_taken_resume.py)."""

import re

import pytest
from django.urls import reverse

from approvals.operator_actions import act
from runs.execution import executor
from runs.machine.errors import TransientError, TransitionNotAllowed
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.approvals.conftest import waiting_run
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


def _resume(user, run):
    return act("resume", run.pk, user=user, given=ActionInput(reason="look again"),
               seen=Run.objects.get(pk=run.pk).audit_seq)


def test_a_run_waiting_for_an_approval_is_told_its_request_decides_it(operator):
    run = waiting_run()
    with pytest.raises(TransitionNotAllowed) as refused:
        _resume(operator, run)
    assert str(refused.value).startswith(
        f"run {run.pk} waits for a person's approval of approve: its approvers decide it "
        "from its approval request")
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert step(run, "approve").status == StepStatus.WAITING


def test_a_sleeping_run_is_pointed_to_the_button_its_page_offers(client_for, operator, script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    assert _resume(operator, run).message.endswith(
        "at cool-off, where it waits again for its timer (Wake now ends that wait).")
    # The words name the button the run page shows, once the run sleeps again.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    page = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert re.search(r">\s*Wake now\s*<", page)


def test_the_run_page_says_it_too(client_for, operator, script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    page = client_for(operator).post(
        reverse("console:action", args=[run.pk, "resume"]),
        {"reason": "look again", "seen": str(Run.objects.get(pk=run.pk).audit_seq)},
        follow=True).content.decode()
    assert "resuming does not end a wait" in page
    assert "Resume: done.<" not in page and "Resume: done.\n" not in page


def test_a_run_waiting_out_a_backoff_is_resumed_and_said_done(operator, script):
    run = new_run()
    script.plan["fetch"] = [TransientError("503")]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    outcome = _resume(operator, run)
    assert outcome.message == "Resume: done."
    assert outcome.run.status == RunStatus.QUEUED
