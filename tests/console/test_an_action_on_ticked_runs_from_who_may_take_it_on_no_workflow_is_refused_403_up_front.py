"""The runs list's action on ticked rows, sent by a person who may take that action on no
workflow at all, is refused at once with 403 and the sentence of the rule the lists offer
bulk actions by (approvals.bulk.forbidden_in_bulk), before the form is read: not run by run,
as if each ticked run were one they might act on some day ("no run you may act on has the
id N"). Nothing is recorded. A person who may take it on some workflow is still answered run
by run."""

import html

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.urls import reverse
from guardian.shortcuts import assign_perm

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, RunStatus, Workflow
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    return [place(new_run(), status=RunStatus.ATTENTION),
            place(new_run("customer-onboarding", email="b@example.com", name="B",
                          plan="free"), status=RunStatus.ATTENTION)]


@pytest.fixture
def viewer(runs):
    """May view every run, and may resume those of customer-onboarding: terminate nowhere."""
    user = User.objects.create_user("vera", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="view_runs",
                                                     content_type__app_label="runs"))
    assign_perm("runs.resume_run", user, Workflow.objects.get(name="customer-onboarding"))
    return user


def _written(runs) -> tuple:
    return (tuple(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("pk")
                  .values_list("status", "audit_seq")),
            AuditRecord.objects.count(), ApprovalRequest.objects.count())


def _terminate(client, runs, **form):
    return client.post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud", "run": [r.pk for r in runs],
        **drawn(*runs), **form})


def test_it_is_refused_403_with_the_sentence_and_nothing_recorded(client_for, viewer, runs):
    before = _written(runs)
    response = _terminate(client_for(viewer), runs)
    assert response.status_code == 403
    assert "vera may not terminate any run (needs runs.terminate_run)" in \
        html.unescape(response.content.decode())
    assert [m.message for m in get_messages(response.wsgi_request)] == []
    assert _written(runs) == before


def test_it_is_refused_before_its_form_is_read(client_for, viewer, runs):
    # A reason no record may keep would otherwise be answered about the text.
    before = _written(runs)
    response = _terminate(client_for(viewer), runs, reason="x\x00")
    assert response.status_code == 403
    assert "vera may not terminate any run" in html.unescape(response.content.decode())
    assert _written(runs) == before


def test_an_action_they_may_take_on_some_workflow_is_still_answered_run_by_run(
        client_for, viewer, runs):
    orders = runs[0]
    response = client_for(viewer).post(reverse("console:bulk"), {
        "action": "resume", "reason": "retry", "run": [orders.pk], **drawn(orders)})
    assert response.status_code == 302
    assert [m.message for m in get_messages(response.wsgi_request)] == [
        f"Resume not done: no run you may act on has the id {orders.pk}."]
