"""A cancel ends a run as terminated (the state model has no cancelled run), but the request
its end closed says what a person did: the run was cancelled, not terminated, wherever the
approver reads it (the withdrawal, the decision refused on it, its page, its link, the run's
audit record). A run cancelled, reopened and then terminated says terminated: the last
ending is the one named."""

import html
import uuid

import pytest
from django.urls import reverse

from approvals import decisions, operator_actions, schedule
from approvals.models import ApprovalRequest
from approvals.tokens import approval_link_token
from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db

OPS = Actor.system("ops")


def _text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_sweep_withdraws_it_saying_the_run_was_cancelled(pending, t0):
    transitions.cancel(pending.run_id, actor=OPS, reason="order withdrawn")
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.TERMINATED
    assert schedule.withdraw_stale_requests(now=t0) == 1
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
    assert "the run ended: it was cancelled" in pending.comment
    assert "terminated" not in pending.comment
    record = AuditRecord.objects.get(run_id=pending.run_id, action="approval_withdrawn")
    assert record.reason == pending.comment


def test_an_operators_cancel_withdraws_it_at_once_saying_so(pending, operators):
    olga, _ = operators
    operator_actions.act("cancel", pending.run_id, user=olga,
                         given=ActionInput(reason="order withdrawn"))
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
    assert "the run ended: it was cancelled" in pending.comment
    assert "terminated" not in pending.comment


def test_a_decision_the_page_and_the_link_say_the_run_was_cancelled(pending, ann, client,
                                                                     t0):
    token = approval_link_token.make_token(pending)
    transitions.cancel(pending.run_id, actor=OPS, reason="order withdrawn")
    client.force_login(ann)
    detail = reverse("approvals:detail", kwargs={"pk": pending.pk})
    before = _text(client.get(detail))
    assert "the run ended: it was cancelled" in before
    assert "it was terminated" not in before

    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert result.outcome == "closed"
    assert "the run ended: it was cancelled" in result.message
    assert "terminated" not in result.message

    schedule.withdraw_stale_requests(now=t0)
    link = client.get(reverse("approvals:link", kwargs={"pk": pending.pk, "token": token}))
    assert link.status_code == 410
    assert "the run ended: it was cancelled" in _text(link)
    assert "it was terminated" not in _text(link)


def test_the_last_ending_is_the_one_named(approvers, t0):
    cancelled, ended_again = waiting_run(), waiting_run()
    open_request(cancelled, t0)  # both runs' requests are opened
    requests = [ApprovalRequest.objects.get(run_id=run.pk) for run in (cancelled, ended_again)]
    transitions.cancel(cancelled.pk, actor=OPS, reason="order withdrawn")
    transitions.cancel(ended_again.pk, actor=OPS, reason="order withdrawn")
    transitions.reopen(ended_again.pk, actor=OPS, reason="cancelled by mistake")
    transitions.terminate(ended_again.pk, actor=OPS, reason="vendor fraud")
    assert schedule.withdraw_stale_requests(now=t0) == 2
    for request in requests:
        request.refresh_from_db()
    assert "the run ended: it was cancelled" in requests[0].comment
    assert "the run ended: it was terminated" in requests[1].comment
    assert "cancelled" not in requests[1].comment
