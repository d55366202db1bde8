"""A bulk job acts on the runs its filter matched when it started, and on each only if it
still matches when the worker reaches it (a run someone else moved on meanwhile is left
alone). Finished, it said "done. 2 of 3 runs handled." and nothing of the third. Now the
job page, the API and the command say how many no longer matched and were not acted on;
a job still running says none yet, and one that reached every run says none."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.urls import reverse

from api.tokens import token_create
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

ATTENTION = RunFilters(status=RunStatus.ATTENTION, workflow="test-orders", workflow_exact=True)


@pytest.fixture
def olga(db, monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def _failed():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def test_a_run_moved_on_before_it_was_reached_is_counted_as_not_acted_on(olga, client):
    runs = [_failed() for _ in range(3)]
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="vendor fraud")
    assert job.total == 3 and bulk_progress(job.pk).skipped == 0
    # Someone else resumed one meanwhile: it no longer matches the filter.
    Run.objects.filter(pk=runs[1].pk).update(status=RunStatus.QUEUED)

    job = run_bulk_job(job.pk)

    progress = bulk_progress(job.pk)
    assert job.status == "done" and progress.handled == 2 and progress.skipped == 1
    assert Run.objects.get(pk=runs[1].pk).status == RunStatus.QUEUED
    assert not AuditRecord.objects.filter(run=runs[1], action="terminated").exists()
    client.force_login(olga)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "2 of 3 runs handled. 1 not acted on: when reached, each no longer matched the " \
        "filter (moved on meanwhile)." in page
    out = io.StringIO()
    call_command("bulk_action", "show", str(job.pk), "--user", "olga", "--json", stdout=out)
    assert json.loads(out.getvalue())["skipped"] == 1
    _, plaintext = token_create(name="ops", workflows=["test-orders"], acting_user=olga)
    api = client.get(f"/api/bulk/{job.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert api.status_code == 200 and api.json()["skipped"] == 1


def test_a_job_that_reached_every_run_skipped_none(olga):
    for _ in range(2):
        _failed()
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="vendor fraud")
    job = run_bulk_job(job.pk)
    progress = bulk_progress(job.pk)
    assert progress.handled == 2 and progress.skipped == 0
