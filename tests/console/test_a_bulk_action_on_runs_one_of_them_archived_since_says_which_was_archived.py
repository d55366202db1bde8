"""A run ticked in the runs list that finished and was archived before the bulk action was
sent (archival moved it out of the hot tables) is no "no run you may act on has the id N"
to whoever may view it: the message says that it finished and was archived, naming the
archive file, and that nothing was done to it, as a single action on it says from its page
(console.views._archived_since). The other runs ticked are acted on. To whoever may not view
it, it stays an id of no run: nothing tells them that it existed."""

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.urls import reverse
from guardian.shortcuts import assign_perm

from archive.models import ArchiveFile
from audit.models import AuditRecord
from runs.models import Run, RunStatus, Workflow
from tests.archived_runs import completed_and_archived
from tests.factories import drawn

pytestmark = pytest.mark.django_db

MISSING = 999999


@pytest.fixture
def archived(settings, tmp_path, script):
    """(run id, the audit sequence its row was drawn at): a completed run, archived."""
    run = completed_and_archived(settings, tmp_path)
    return run.run_id, run.seen


def _terminate(client, stuck_run, archived, *more):
    run_id, seen = archived
    return client.post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud",
        "run": [str(stuck_run.pk), str(run_id), *map(str, more)],
        f"seen-{run_id}": str(seen), **drawn(stuck_run)})


def _records_of_others(run) -> int:
    """Audit records of every run but `run`: nothing is written of the archived one."""
    return AuditRecord.objects.exclude(run_id=run.pk).count()


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


def test_the_archived_run_is_named_with_its_archive_file_and_the_other_is_terminated(
        client_for, operator, stuck_run, archived):
    run_id, _ = archived
    name = ArchiveFile.objects.get().name
    others = _records_of_others(stuck_run)

    response = _terminate(client_for(operator), stuck_run, archived, MISSING)

    assert response.status_code == 302
    assert _messages(response) == [
        ("success", f"Terminate done for runs {stuck_run.pk}."),
        ("error", f"Terminate not done: run {run_id} finished (completed) and was archived "
                  f"to {name!r} since the list was drawn; nothing was done to it."),
        ("error", f"Terminate not done: no run you may act on has the id {MISSING}.")]
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert not Run.objects.filter(pk=run_id).exists()
    assert _records_of_others(stuck_run) == others


def test_to_whoever_may_not_view_it_it_is_still_no_run_you_may_act_on(
        client_for, stuck_run, archived):
    """May terminate runs of the workflow, not view them: an action's permission does not
    bring the view permission with it."""
    run_id, _ = archived
    terminator = User.objects.create_user("tess")
    assign_perm("runs.terminate_run", terminator, Workflow.objects.get(name="test-orders"))
    others = _records_of_others(stuck_run)

    response = _terminate(client_for(terminator), stuck_run, archived)

    assert _messages(response) == [
        ("success", f"Terminate done for runs {stuck_run.pk}."),
        ("error", f"Terminate not done: no run you may act on has the id {run_id}.")]
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert _records_of_others(stuck_run) == others
