"""The runs list's "With selected" says what became of each run, as the run page says for
one: done, or waiting for a second person (four eyes) with its approval request, for which
nothing was done yet, or refused."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest, BulkOutcome
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db


def _high_impact_run():
    """A run whose high-impact step took place: ending it needs a second person."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def _messages(response) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in get_messages(response.wsgi_request):
        found.setdefault(message.level_tag, []).append(message.message)
    return found


def test_a_bulk_terminate_names_the_runs_done_and_those_waiting_for_a_second_person(
        client_for, operator, stuck_run):
    waits = _high_impact_run()
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud", "run": [waits.pk, stuck_run.pk],
        **drawn(waits, stuck_run)})
    assert response.status_code == 302
    request = ApprovalRequest.objects.get(run=waits, action="terminate")
    assert _messages(response) == {
        "success": [f"Terminate done for runs {stuck_run.pk}."],
        "info": [f"A second person must approve terminate for runs {waits.pk} (approval "
                 f"request {request.pk} created); nothing was done to them yet."]}
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert Run.objects.get(pk=waits.pk).status == RunStatus.ATTENTION


def test_a_bulk_action_only_opening_requests_says_nothing_was_done(client_for, operator):
    first, second = _high_impact_run(), _high_impact_run()
    client = client_for(operator)
    data = {"action": "terminate", "reason": "vendor fraud", "run": [first.pk]}
    client.post(reverse("console:bulk"), {**data, **drawn(first)}, follow=True)  # shown
    response = client.post(reverse("console:bulk"), {**data, "run": [first.pk, second.pk],
                                                     **drawn(first, second)})
    old, new = (ApprovalRequest.objects.get(run=run) for run in (first, second))
    assert _messages(response) == {
        "info": [f"A second person must approve terminate for runs {first.pk} (approval "
                 f"request {old.pk} already waits), {second.pk} (approval request {new.pk} "
                 "created); nothing was done to them yet."]}
    assert set(Run.objects.filter(pk__in=[first.pk, second.pk])
               .values_list("status", flat=True)) == {RunStatus.ATTENTION}


def test_a_bulk_jobs_run_waiting_for_a_second_person_names_the_action_as_its_button_does(
        operator):
    waits = _high_impact_run()
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=operator,
                            reason="vendor fraud")

    run_bulk_job(job.pk)

    outcome = BulkOutcome.objects.get(job=job, run_id=waits.pk)
    assert outcome.outcome == BulkOutcome.Outcome.SECOND_PERSON
    assert outcome.message.startswith(
        f"Terminate of run {waits.pk} needs a second person's approval: high-impact effects "
        "stand or may stand ("), outcome.message
    assert Run.objects.get(pk=waits.pk).status == RunStatus.ATTENTION
