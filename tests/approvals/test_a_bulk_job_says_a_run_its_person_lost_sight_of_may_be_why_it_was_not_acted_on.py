"""A bulk job lists its runs a batch at a time, each batch among the runs its person may
see then. A person whose permission is taken away while the job runs has the runs of the
later batches left out, and the job's page said of them only that they "no longer matched
the filter (moved on meanwhile)": told that the runs had moved on, when they had not. The
page now says they were not acted on because they no longer matched the filter or were no
longer visible to the person, counts them, and names none of them (whoever may not see a
run learns nothing of it)."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import bulk
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def test_the_page_counts_them_without_saying_they_moved_on_or_naming_them(client,
                                                                         monkeypatch):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    operators = Group.objects.get(name="operators")
    olga.groups.add(operators)
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 9")
    job = run_bulk_job(job.pk, batches=1)
    olga.groups.remove(operators)  # her sight of every run, taken away mid-job

    job = run_bulk_job(job.pk)

    progress = bulk_progress(job.pk)
    assert job.status == "done" and progress.counts == {"done": 2}
    assert progress.skipped == 1
    lost = runs[2]
    assert Run.objects.get(pk=lost.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=lost, action="terminated").exists()
    client.force_login(olga)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "moved on meanwhile): not acted on" not in page
    assert "2 of 3 runs handled. 1 not acted on: when reached, each no longer matched the " \
           "filter (moved on meanwhile) or was no longer visible to olga" in page
    assert f"#{lost.pk}<" not in page and reverse("console:run", args=[lost.pk]) not in page
