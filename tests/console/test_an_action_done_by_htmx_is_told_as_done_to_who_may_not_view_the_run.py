"""An action taken from the run page with htmx answers with the run drawn again. A person
may hold an action's permission on a workflow without its view permission (guardian grants
each one alone): the action is theirs to take, and once taken the answer says that it was
done, not 403 "You may not view this run" (which htmx does not even show), so that nobody
takes a done action for a refused one. The answer shows nothing of the run but what the
person did."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from audit.models import AuditRecord
from runs.models import Run, RunStatus, Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def terminator(stuck_run):
    """May terminate test-orders runs, and not view them."""
    user = User.objects.create_user("tom", password="pw")
    assign_perm("runs.terminate_run", user, Workflow.objects.get(name="test-orders"))
    return user


def _terminate(client, run, reason="duplicate order"):
    return client.post(reverse("console:action", args=[run.pk, "terminate"]),
                       {"reason": reason, "seen": str(Run.objects.get(pk=run.pk).audit_seq)},
                       HTTP_HX_REQUEST="true")


def test_a_done_action_is_answered_as_done_to_who_may_not_view_the_run(client_for, terminator,
                                                                      stuck_run):
    response = _terminate(client_for(terminator), stuck_run)
    body = response.content.decode()
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert response.status_code == 200
    assert "Terminate: done." in body
    # Nothing of the run beyond the person's own action: not its key, steps or error.
    assert stuck_run.business_key not in body and "create-task" not in body
    assert "403 from tracker" not in body and "&lt;script" not in body
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated",
                                      actor_user_id=terminator.pk).count() == 1


def test_a_refused_action_is_answered_as_refused_to_who_may_not_view_the_run(
        client_for, terminator, stuck_run):
    before = AuditRecord.objects.count()
    response = _terminate(client_for(terminator), stuck_run, reason="   ")
    body = response.content.decode()
    # A field's text refused: 422 naming the field, for the dialog to mark it.
    assert response.status_code == 422
    assert response["X-Refused-Field"] == "reason"
    assert "Terminate needs a reason" in body and "was not done" not in body
    assert stuck_run.business_key not in body
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.count() == before


def test_without_htmx_the_page_reached_after_the_action_says_it_was_done_not_undone(
        client_for, terminator, stuck_run):
    client = client_for(terminator)
    response = client.post(reverse("console:action", args=[stuck_run.pk, "terminate"]),
                           {"reason": "duplicate order",
                            "seen": str(Run.objects.get(pk=stuck_run.pk).audit_seq)},
                           follow=True)
    body = response.content.decode()
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    # The run's page is refused (no view permission), and says so without denying the action.
    assert response.status_code == 403
    assert "Terminate: done." in body
    assert "Nothing was changed" not in body
    assert stuck_run.business_key not in body


def test_a_refused_post_still_says_nothing_was_changed(client_for, stuck_run):
    nobody = User.objects.create_user("nemo", password="pw")
    response = client_for(nobody).post(
        reverse("console:action", args=[stuck_run.pk, "terminate"]),
        {"reason": "x", "seen": str(Run.objects.get(pk=stuck_run.pk).audit_seq)})
    assert response.status_code == 403
    assert "Nothing was changed" in response.content.decode()
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
