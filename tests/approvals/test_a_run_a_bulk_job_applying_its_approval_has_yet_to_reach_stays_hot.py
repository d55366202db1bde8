"""Once a bulk job's request is approved, the job's worker applies it (approvals.
bulk_approved), naming the approver and the decision from that request. The request is
settled at once, so the archive pass no longer held the run it hangs on: archived before the
worker came, its run took the request along, the job lost its approval, and the worker
could not name who approved. The run stays in the hot tables while the job applies the
approval, and so do the runs the worker has yet to reach; the pass after it is done
archives them."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, schedule
from approvals.bulk import run_bulk_job
from approvals.models import ApprovalRequest, BulkOutcome
from approvals.operator_actions import act
from archive.archiving import archive_runs
from archive.models import ArchivedRun
from audit.models import AuditRecord
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


def test_the_run_the_request_hangs_on_stays_until_the_job_has_applied_the_approval(people):
    olga, carl, omar = people
    anchor, *others = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    act("resume", anchor.pk, user=omar, given=ActionInput(reason="fixed upstream"))
    executor.advance_run(anchor.pk, worker="w1")
    assert Run.objects.get(pk=anchor.pk).status == RunStatus.COMPLETED
    schedule.sweep()
    decision = decisions.decide(job.approval_id, user=olga, approved=True,
                                comment="incident 42", decision_id=uuid.uuid4())
    assert decision.recorded, decision.message
    assert ApprovalRequest.objects.get(pk=job.approval_id).settled_at is not None

    archive_runs(actor="test")  # before the job's worker came to it

    assert Run.objects.filter(pk=anchor.pk).exists()
    assert not ArchivedRun.objects.exists()
    job = run_bulk_job(job.pk)
    assert job.status == "done" and job.approval_id is not None
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {anchor.pk: "refused", **{run.pk: "done" for run in others}}
    for run in others:
        (record,) = AuditRecord.objects.filter(run=run, action="terminated")
        assert record.data["approved_by"] == "olga"

    archive_runs(actor="test")

    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == {
        anchor.pk, *(run.pk for run in others)}
    assert not Run.objects.filter(pk=anchor.pk).exists()
