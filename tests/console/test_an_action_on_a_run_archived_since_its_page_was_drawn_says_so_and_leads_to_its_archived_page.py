"""A run archived while its page was open (it finished, and archival moved it out of the hot
tables) is no "Not found" to the operator who then presses Reopen or Compensate there: the
console says the action was not done because the run was archived, names the archive file,
and leads to the run's archived page, as the run's address does (run_detail), as the API
answers 410 `run_archived` and as run_action on the command line says. Its investigation's
address leads there too. To whoever may not view the run, it stays no run (404)."""

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.urls import reverse

from archive.models import ArchiveFile
from audit.models import AuditRecord
from tests.archived_runs import completed_and_archived

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(settings, tmp_path, script):
    """(run id, the audit sequence its page was drawn at): a completed run, archived."""
    run = completed_and_archived(settings, tmp_path)
    return run.run_id, run.seen


@pytest.mark.parametrize("action, label", [("compensate", "Compensate"), ("reopen", "Reopen")])
def test_the_action_says_the_run_was_archived_and_leads_to_its_archived_page(
        client_for, operator, archived, action, label):
    run_id, seen = archived
    client = client_for(operator)
    records = AuditRecord.objects.count()

    response = client.post(reverse("console:action", args=[run_id, action]),
                           {"seen": str(seen), "reason": "customer asked"})

    assert response.status_code == 302
    assert response["Location"] == reverse("console:archived_run", args=[run_id])
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(said) == 1
    assert said[0].startswith(f"{label} was not done: run {run_id} finished (completed) and "
                              "was archived")
    assert ArchiveFile.objects.get().name in said[0]
    assert AuditRecord.objects.count() == records


def test_sent_from_its_dialog_the_browser_is_sent_to_the_archived_page(client_for, operator,
                                                                        archived):
    run_id, seen = archived
    response = client_for(operator).post(
        reverse("console:action", args=[run_id, "reopen"]), {"seen": str(seen), "reason": "x"},
        headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("console:archived_run", args=[run_id])


def test_its_investigation_leads_to_its_archived_page(client_for, operator, archived):
    run_id, _ = archived
    response = client_for(operator).get(reverse("console:investigation", args=[run_id]))

    assert response.status_code == 302
    assert response["Location"] == reverse("console:archived_run", args=[run_id])


def test_to_whoever_may_not_view_it_it_is_still_no_run(client_for, archived):
    run_id, seen = archived
    client = client_for(User.objects.create_user("nobody"))

    assert client.post(reverse("console:action", args=[run_id, "reopen"]),
                       {"seen": str(seen), "reason": "x"}).status_code == 404
    assert client.get(reverse("console:investigation", args=[run_id])).status_code == 404
