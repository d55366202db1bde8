"""The operator who asked for a four-eyes action and posts the decide form is told at once
that another person decides it, whatever the form holds: a rejection without a comment, or
a form whose hidden fields were lost, was answered with a 400 page listing what to fix in
the form ("the comment is missing"), as if they could decide once it was right. The API
refuses them before it reads the body; the console page now does the same. Nothing is
recorded either way."""

import html
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import four_eyes
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def asked(db):
    """A four-eyes request olga asked for (compensating a run whose effects stand)."""
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", email="olga@example.com")
    olga.groups.add(Group.objects.get(name="operators"))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    approval, created = four_eyes.request_operator_action(
        run, action="compensate", requested_by=olga, reason="INC-7")
    assert created
    return olga, approval


@pytest.mark.parametrize("form", [
    {"decision": "reject", "comment": ""},  # a rejection needs a comment
    {"decision": "approve", "decision_id": ""},  # the hidden decision id lost
    {"decision": "perhaps", "comment": "x" * 5000},
])
def test_the_requester_is_refused_for_four_eyes_whatever_the_form_holds(client, asked, form):
    olga, approval = asked
    records = AuditRecord.objects.filter(run_id=approval.run_id).count()
    client.force_login(olga)
    response = client.post(reverse("approvals:decide", kwargs={"pk": approval.pk}),
                           {"decision_id": str(uuid.uuid4()), **form})
    assert response.status_code == 403
    text = html.unescape(response.content.decode())
    assert "four eyes means another person decides it" in text
    assert "comment is missing" not in text and "Nothing was recorded." not in text
    approval.refresh_from_db()
    assert approval.status == RequestStatus.PENDING and approval.decision_id is None
    assert AuditRecord.objects.filter(run_id=approval.run_id).count() == records
    assert ApprovalRequest.objects.count() == 1
