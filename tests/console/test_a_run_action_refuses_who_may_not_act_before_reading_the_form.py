"""A run action checks the permission before the input it was given: whoever may not act
on a run is answered 403 whatever the form holds, also text the database cannot store (a
NUL character), which was answered with a message about the text and a redirect, as if the
person might have acted with other words. Nothing is written either way."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, Workflow

pytestmark = pytest.mark.django_db


def _written(run):
    fresh = Run.objects.get(pk=run.pk)
    return (fresh.status, fresh.audit_seq, AuditRecord.objects.count(),
            ApprovalRequest.objects.count())


@pytest.fixture
def viewer(stuck_run):
    """May see test-orders runs, and act on none."""
    user = User.objects.create_user("vera", password="pw")
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="test-orders"))
    return user


@pytest.mark.parametrize("field", ["reason", "step", "remote_ref", "evidence", "call"])
@pytest.mark.parametrize("htmx", [False, True])
def test_a_form_with_a_nul_character_from_a_person_who_may_not_act_is_refused_403(
        client_for, viewer, stuck_run, field, htmx):
    before = _written(stuck_run)
    data = {"reason": "forged", "seen": str(stuck_run.audit_seq), field: "x\x00"}
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client_for(viewer).post(reverse("console:action",
                                               args=[stuck_run.pk, "terminate"]),
                                       data, **headers)
    assert response.status_code == 403
    assert "NUL" not in response.content.decode()
    assert not list(response.wsgi_request._messages)
    assert _written(stuck_run) == before


def test_a_form_with_a_nul_character_for_no_run_is_not_found(client_for, operator):
    response = client_for(operator).post(reverse("console:action", args=[987654, "terminate"]),
                                         {"reason": "x\x00", "seen": "1"})
    assert response.status_code == 404


def test_whoever_may_act_is_told_what_is_wrong_with_the_text_and_nothing_is_done(
        client_for, operator, stuck_run):
    before = _written(stuck_run)
    response = client_for(operator).post(
        reverse("console:action", args=[stuck_run.pk, "terminate"]),
        {"reason": "x\x00", "seen": str(stuck_run.audit_seq)}, follow=True)
    assert response.status_code == 200
    assert "Terminate was not done: reason: NUL characters cannot be stored" in \
        response.content.decode()
    assert _written(stuck_run) == before
