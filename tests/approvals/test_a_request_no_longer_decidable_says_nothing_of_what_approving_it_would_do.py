"""A request's page said "What the action will do" (or "What happens once it is approved")
after the request was decided, withdrawn or being closed, told from the run as it is now:
a re-run from a step, approved and applied, then read "No write or notification stands
from fetch on" beside the decision that sent both of its writes again. What approving sets
off is told while the request can still be approved; the snapshot keeps what was asked."""

import html
import re
import uuid

import pytest
from django.urls import reverse

from approvals import four_eyes
from approvals.models import ApprovalRequest
from runs.machine.transitions import terminate
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import SYSTEM, advance_once, new_run

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    assert response.status_code == 200
    main = response.content.decode().split("<main", 1)[1]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", main)).split())


def _completed_run() -> Run:
    run = new_run()
    while run.status != RunStatus.COMPLETED:
        run = advance_once(run)
    return run


def test_an_approved_re_run_is_not_told_as_one_where_nothing_stands(operators, client):
    olga, omar = operators
    run = _completed_run()
    request, _ = four_eyes.request_operator_action(
        run, action="rerun_from_step", requested_by=olga, reason="send again",
        params={"step": "fetch"})
    client.force_login(omar)
    asked = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert "What the action will do" in asked and "post-ledger: succeeded" in asked

    client.post(reverse("approvals:decide", kwargs={"pk": request.pk}),
                {"decision": "approve", "comment": "ok", "decision_id": str(uuid.uuid4())})
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"
    assert Run.objects.get(pk=run.pk).generation == 1

    decided = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert "Approved by omar" in decided
    assert "What the action will do" not in decided
    assert "No write or notification stands" not in decided


def test_a_withdrawn_steps_request_says_nothing_of_what_would_follow(approvers, ann, client):
    run = waiting_run()
    request = open_request(run)
    client.force_login(ann)
    asked = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert "What happens once it is approved" in asked

    terminate(run.pk, actor=SYSTEM, reason="customer cancelled")
    closed = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert "can no longer be decided" in closed
    assert "What happens once it is approved" not in closed
    assert "pay: change another system" not in closed
