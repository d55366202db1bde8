"""A decision id names one decision on one request: the same form sent again is recognised
and changes nothing, but the id sent to another request, or with the opposite decision, is
refused as an error and nothing is written. The approver's page shows the step a four-eyes
request is about, and tells its requester that it is four eyes in the words the API uses."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import ERROR, INFO, get_messages
from django.urls import reverse

from approvals import decisions, four_eyes
from approvals.models import ApprovalRequest
from approvals.permissions import decide_refusal
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _post(client, request, decision_id, decision="approve", comment=""):
    response = client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": decision, "comment": comment, "decision_id": str(decision_id)})
    assert response.status_code == 302, response.content
    # Not shown yet (the redirect is not followed): the messages pile up, this one last.
    return [(m.level, m.message) for m in get_messages(response.wsgi_request)][-1]


def test_a_decision_id_reused_on_the_page_is_an_error_and_writes_nothing(pending, ann,
                                                                         client):
    other = open_request(waiting_run())
    client.force_login(ann)
    decision_id = uuid.uuid4()
    assert _post(client, pending, decision_id)[0] != ERROR
    pending.refresh_from_db()
    assert pending.status == "approved"
    records = AuditRecord.objects.count()

    level, message = _post(client, other, decision_id)
    assert level == ERROR and f"approval request {pending.pk}" in message
    other.refresh_from_db()
    assert other.status == "pending" and other.decision_id is None
    assert AuditRecord.objects.count() == records

    level, _ = _post(client, pending, decision_id, "reject", comment="on second thought")
    assert level == ERROR
    pending.refresh_from_db()
    assert pending.status == "approved" and pending.comment == ""
    assert AuditRecord.objects.count() == records

    level, _ = _post(client, pending, decision_id)
    assert level == INFO
    assert decisions.decide(pending.pk, user=ann, approved=True,
                            decision_id=decision_id).outcome == "already_recorded"
    assert AuditRecord.objects.count() == records


@pytest.fixture
def ops(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    omar = User.objects.create_user("omar", password="pw")
    Group.objects.get(name="operators").user_set.add(olga, omar)
    return olga, omar


def test_a_rerun_request_page_shows_its_step_and_tells_its_requester_it_is_four_eyes(
        client, ops, script):
    olga, omar = ops
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    place(run, status=RunStatus.ATTENTION)
    request, _ = four_eyes.request_operator_action(
        run, action="rerun_from_step", requested_by=olga, reason="ledger lost it",
        params={"step": "post-ledger"})
    assert request.target_step == "post-ledger"
    client.force_login(omar)
    page = client.get(reverse("approvals:detail", kwargs={"pk": request.pk})).content.decode()
    assert "<dt>Step</dt><dd>post-ledger</dd>" in page

    client.force_login(olga)
    refused = client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": "approve", "comment": "", "decision_id": str(uuid.uuid4())})
    assert refused.status_code == 403
    reason = decide_refusal(olga, request)
    assert "four eyes" in reason and reason in refused.content.decode()
    with pytest.raises(Exception, match="four eyes"):
        decisions.decide(request.pk, user=olga, approved=True, decision_id=uuid.uuid4())
    assert ApprovalRequest.objects.get(pk=request.pk).status == "pending"
