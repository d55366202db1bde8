"""An approval email's link to a request that no longer exists (its run finished and was
archived: a workflow may keep finished runs for no day at all, shorter than a link lives)
gets a page that names this among the causes and says nothing was changed. It was told
only that the link "is incomplete or has been altered", which was false of the email the
person holds. The page does not say which cause it is, nor name the id: a forged link
gets the same one, so that trying ids tells nobody which requests exist
(test_a_link_naming_a_request_that_does_not_exist_is_answered_as_a_forged_one). The link
still counts against the address as an unverifiable one (approvals.throttle)."""

import html
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.urls import reverse

from approvals import schedule
from approvals.models import ApprovalRequest
from approvals.tokens import approval_link_token
from archive import archiving
from audit.chain import Actor
from runs.machine import transitions
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}


def test_the_link_of_an_archived_request_says_the_request_may_no_longer_exist(pending, ann, client):
    link = reverse("approvals:link", kwargs={
        "pk": pending.pk, "token": approval_link_token.make_token(pending)})
    transitions.terminate(pending.run_id, actor=Actor.system("ops"), reason="duplicate")
    schedule.sweep()  # withdrawn: the run ended
    Run.objects.filter(pk=pending.run_id).update(
        updated_at=Run.objects.get(pk=pending.run_id).updated_at - timedelta(days=1))
    report = archiving.archive_runs(actor="test", older_than_days=0)
    assert report.runs_written == 1
    assert not ApprovalRequest.objects.filter(pk=pending.pk).exists()

    client.force_login(ann)
    response = client.get(link)
    assert response.status_code == 400
    text = " ".join(html.unescape(response.content.decode()).split())
    assert "This approval link is not valid" in text
    assert "the request it names no longer exists here" in text
    assert "kept in the run's archive" in text
    assert "Nothing was changed" in text
    assert f"request {pending.pk}" not in text
    assert AccessAttempt.objects.filter(username="(approval link)").count() == 1
