"""A request whose run ended while it waited is closed, and what it says about it is one
true thing wherever it is read (the request, the decision refused on it, its page, its
link, the run's audit record): the run ended (terminated, completed, compensated) and the
request was closed without a decision. An ended run's approval step keeps the status it
had (terminate leaves it `waiting`); the request never says the step is waiting."""

import html
import uuid

import pytest
from django.urls import reverse

from approvals import decisions, schedule
from approvals.tokens import approval_link_token
from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import RunStatus, Step, StepStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import place

pytestmark = pytest.mark.django_db

OPS = Actor.system("ops")


def _text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_sweep_withdraws_it_saying_the_run_ended(pending, t0):
    transitions.terminate(pending.run_id, actor=OPS, reason="vendor fraud")
    # What made the old wording false: the ended run's step still says waiting.
    assert Step.objects.get(run_id=pending.run_id, name="approve").status == StepStatus.WAITING
    assert schedule.withdraw_stale_requests(now=t0) == 1
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
    assert "the run ended: it was terminated" in pending.comment
    assert "waiting" not in pending.comment and "no longer waits" not in pending.comment
    record = AuditRecord.objects.get(run_id=pending.run_id, action="approval_withdrawn")
    assert record.reason == pending.comment


def test_a_decision_meeting_it_is_told_the_run_ended_and_nothing_was_decided(pending, ann):
    transitions.terminate(pending.run_id, actor=OPS, reason="vendor fraud")
    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert result.outcome == "closed"
    assert "the run ended: it was terminated" in result.message
    assert "waiting" not in result.message
    assert "nothing was decided" in result.message


def test_the_request_page_says_the_run_ended_and_the_request_was_closed(pending, ann, client,
                                                                         t0):
    transitions.terminate(pending.run_id, actor=OPS, reason="vendor fraud")
    client.force_login(ann)
    detail = reverse("approvals:detail", kwargs={"pk": pending.pk})

    # Before the sweep: the page says the same thing the request will say once withdrawn.
    before = _text(client.get(detail))
    assert "the run ended: it was terminated" in before
    assert "closed without a decision" in before
    assert "no longer waits for this decision" not in before
    assert 'value="approve"' not in before

    schedule.withdraw_stale_requests(now=t0)
    after = _text(client.get(detail))
    assert "the run ended: it was terminated" in after
    assert "closed without a decision" in after
    assert "step waiting" not in after and "no longer waits" not in after


def test_the_link_of_a_request_its_run_ending_closed_says_so(pending, client, t0):
    token = approval_link_token.make_token(pending)
    transitions.terminate(pending.run_id, actor=OPS, reason="vendor fraud")
    schedule.withdraw_stale_requests(now=t0)
    response = client.get(reverse("approvals:link", kwargs={"pk": pending.pk,
                                                            "token": token}))
    assert response.status_code == 410
    text = _text(response)
    assert "closed without a decision" in text
    assert "the run ended: it was terminated" in text
    assert "it was decided, replaced" not in text


@pytest.mark.parametrize("ended", [RunStatus.COMPLETED, RunStatus.COMPENSATED])
def test_every_way_a_run_ends_is_named(approvers, t0, ended):
    run = waiting_run()
    request = open_request(run, t0)
    place(run, status=ended)
    assert schedule.withdraw_stale_requests(now=t0) == 1
    request.refresh_from_db()
    assert request.status == "withdrawn"
    assert f"the run ended: it was {ended}" in request.comment
    assert "waiting" not in request.comment


def test_a_run_that_goes_on_without_the_step_says_what_became_of_the_step(approvers, t0):
    """A run that has not ended names what happened to the step instead."""
    run = waiting_run()
    request = open_request(run, t0)
    place(run, status=RunStatus.WAITING, step_statuses={"approve": StepStatus.SKIPPED})
    assert schedule.withdraw_stale_requests(now=t0) == 1
    request.refresh_from_db()
    assert "no longer waits for this decision" in request.comment
    assert "step skipped" in request.comment and "run ended" not in request.comment


def test_a_run_ended_with_an_effect_unsettled_is_said_to_have_ended(pending, t0):
    # A person ended it while an effect was unknown: it is held in attention until each is
    # settled, and goes forward no more; its request was not awaited since.
    transitions.cancel(pending.run_id, actor=OPS, reason="vendor fraud")
    place(pending.run, status=RunStatus.ATTENTION, attention_reason="ended_unsettled")
    assert schedule.withdraw_stale_requests(now=t0) == 1
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
    assert "the run ended: it was cancelled" in pending.comment
    assert "run attention" not in pending.comment
