"""A bulk job gathers the runs that need a second person and, at its end, opens one
four-eyes request for them in its person's name. A person whose account was deactivated
while the job ran still had that request opened in their name: each approver was asked to
decide it, and approving it was then refused run by run (the account may act on no run),
so they were asked to decide something that could do nothing. The job now reads the
account from the database as it ends: deactivated, no request is opened, and each of those
runs is told forbidden on the job's page, saying why and that a person who may act starts
the job again. An active person's job still opens its request."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import bulk
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from runs.reads.selectors import RunFilters
from tests.approvals.bulk_requests import run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def carl(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("carl")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def a_job_over_a_batch(carl, monkeypatch) -> tuple[BulkJob, list[Run]]:
    """carl's bulk terminate of three runs that each need a second person, worked a batch
    (of two) at a time: the first batch's runs wait for the request the job's end opens."""
    runs = [run_with_an_effect() for _ in range(3)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                            user=carl, reason="incident 42")
    job = run_bulk_job(job.pk, batches=1)
    assert bulk_progress(job.pk).counts == {"second_person": 2}
    return job, runs


def test_a_job_whose_person_was_deactivated_opens_no_request_and_says_why(
        carl, monkeypatch, client):
    job, runs = a_job_over_a_batch(carl, monkeypatch)
    User.objects.filter(pk=carl.pk).update(is_active=False)

    job = run_bulk_job(job.pk)

    assert job.status == "done" and job.approval_id is None
    assert not ApprovalRequest.objects.exists()
    # The third, reached after the change, was not acted on either.
    outcomes = BulkOutcome.objects.filter(job=job)
    assert not outcomes.exclude(outcome="forbidden").exists()
    messages = dict(outcomes.values_list("run_id", "message"))
    for run in runs[:2]:
        assert "carl's account is no longer active" in messages[run.pk]
        assert "a person who may act can start the job again" in messages[run.pk]
    assert {Run.objects.get(pk=r.pk).status for r in runs} == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(action="terminated").exists()
    admin = User.objects.create_superuser("root", password="x")
    client.force_login(admin)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "carl&#x27;s account is no longer active" in page
    assert "approval request" not in page


def test_an_active_persons_job_still_opens_its_request(carl, monkeypatch):
    job, runs = a_job_over_a_batch(carl, monkeypatch)

    job = run_bulk_job(job.pk)

    assert job.status == "done" and job.approval_id is not None
    assert sorted(ApprovalRequest.objects.get(pk=job.approval_id).bulk_runs) == \
        [r.pk for r in runs]
    assert bulk_progress(job.pk).counts == {"second_person": 3}
