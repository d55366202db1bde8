"""The runs list's bulk form sends, with each run ticked, the state its row showed (the run's
audit sequence, refreshed with the row): a run that moved on since is refused and told of,
as one run's form is, and the others are acted on. A form without that state for a run
ticked refuses that run."""

import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.operator_actions import act
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db


def _stuck():
    return place(new_run(), status=RunStatus.ATTENTION)


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_each_row_of_the_runs_list_carries_the_state_it_shows(client_for, operator):
    run = _stuck()
    body = client_for(operator).get(reverse("console:runs")).content.decode()
    seq = Run.objects.get(pk=run.pk).audit_seq
    assert re.search(rf'name="seen-{run.pk}" value="{seq}" form="bulk"', body)


def test_a_run_that_moved_on_since_its_row_was_drawn_is_refused_and_the_others_done(
        client_for, operator):
    moved, still = _stuck(), _stuck()
    page = drawn(moved, still)
    # Someone else acts on one of them after the page was drawn.
    act("resume", moved.pk, user=operator, given=ActionInput(reason="fixed elsewhere"))
    moved_status = Run.objects.get(pk=moved.pk).status
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "cleanup", "run": [moved.pk, still.pk], **page})
    assert Run.objects.get(pk=moved.pk).status == moved_status != RunStatus.TERMINATED
    assert Run.objects.get(pk=still.pk).status == RunStatus.TERMINATED
    said = _messages(response)
    assert f"Terminate done for runs {still.pk}." in said
    assert any(f"refused for runs {moved.pk} (The run moved on since this page was drawn"
               in m for m in said)


def test_a_run_ticked_without_the_state_its_row_showed_is_refused(client_for, operator):
    run = _stuck()
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "cleanup", "run": [run.pk]})
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert any(f"refused for runs {run.pk} (The run moved on" in m
               for m in _messages(response))
