"""A bulk job's four-eyes request hangs on the job's first run and outlives that run's end:
it still decides the job's other runs. Archiving that run once its retention passed took
the request to the archive with it (its rows leave the hot tables with their run), and the
job's other runs lost their wait for the second person without a word. The run stays in the
hot tables while the request is open; the pass after it is settled archives it."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, schedule
from approvals.bulk import run_bulk_job
from approvals.models import ApprovalRequest, RequestStatus
from approvals.operator_actions import act
from archive.archiving import archive_runs
from archive.models import ArchivedRun
from console.roles import ensure_roles
from runs.definitions import definition
from runs.execution import executor
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path, monkeypatch):
    """Archive files in this test's own directory; test-orders keeps finished runs no day."""
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    monkeypatch.setattr(definition.registry.latest("test-orders"), "retention_days", 0)


@pytest.fixture
def people(db):
    """olga decides, carl asked, omar resumes a run meanwhile."""
    ensure_roles(Group, Permission)
    olga, carl, omar = (User.objects.create_user(name) for name in ("olga", "carl", "omar"))
    for user in (olga, carl, omar):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl, omar


def test_the_run_stays_until_the_request_is_decided_and_then_is_archived(people):
    olga, carl, omar = people
    anchor, *others = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    act("resume", anchor.pk, user=omar, given=ActionInput(reason="fixed upstream"))
    executor.advance_run(anchor.pk, worker="w1")
    assert Run.objects.get(pk=anchor.pk).status == RunStatus.COMPLETED
    schedule.sweep()

    archive_runs(actor="test")

    assert Run.objects.filter(pk=anchor.pk).exists()
    assert not ArchivedRun.objects.filter(original_run_id=anchor.pk).exists()
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.status == RequestStatus.PENDING

    decision = decisions.decide(request.pk, user=olga, approved=True, comment="incident 42",
                                decision_id=uuid.uuid4())
    assert decision.recorded, decision.message
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert {Run.objects.get(pk=run.pk).status for run in others} == {RunStatus.TERMINATED}

    archive_runs(actor="test")

    assert ArchivedRun.objects.filter(original_run_id=anchor.pk).exists()
    assert not Run.objects.filter(pk=anchor.pk).exists()
