"""A bulk job's runs are those its filter matched when it started among the runs its person
could see then. A person whose permission to see runs was taken away while the job ran had
the later runs left out of its batches, counted with the runs that left the filter: the
page, the API and the command said they "no longer matched the filter (moved on
meanwhile) or were no longer visible", one count for two causes. The job now keeps what its
person could see when it started (approvals.bulk_sight): a run they lost sight of is not
acted on and is counted apart, as not_visible ("no longer visible to olga"), and is never
named (no run id, no link: whoever may not see a run learns nothing more of it); a run
that moved on is still counted as skipped.

A real Celery worker works the job; it is held at the third run (another session holds its
row) while olga's permissions on the runs' workflow are taken away and another person
resumes a run of another workflow she still sees (it moved on)."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.urls import reverse
from guardian.shortcuts import assign_perm, remove_perm

from approvals.bulk import bulk_progress, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus, Workflow
from runs.reads.selectors import RunFilters
from tests.approvals.run_lock_order import session
from tests.factories import new_run, place
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def test_the_runs_lost_sight_of_are_counted_apart_and_never_named(tmp_path, client,
                                                                   monkeypatch):
    olga = User.objects.create_user("olga", password="pw")
    orders, charges = (Workflow.objects.get(name=name)
                       for name in ("test-orders", "test-charge-then-wait"))
    for workflow in (orders, charges):
        for codename in ("runs.view_runs", "runs.terminate_run"):
            assign_perm(codename, olga, workflow)
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(5)]
    runs.append(place(new_run("test-charge-then-wait"), status=RunStatus.ATTENTION))
    held_run, moved_on = runs[2], runs[5]
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [held_run.pk])
    worker = None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=olga, reason="incident 9")
            # DB_LOCK_TIMEOUT=0: the worker waits for the held row as long as it is held.
            worker = start_worker("bulk", tmp_path, DB_LOCK_TIMEOUT=0)
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=held_run.pk).exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the worker to act on two runs and wait for the third's row")
            for codename in ("runs.view_runs", "runs.terminate_run"):
                remove_perm(codename, olga, orders)  # her sight of its runs, and her right
            Run.objects.filter(pk=moved_on.pk).update(status=RunStatus.QUEUED)
        finally:
            holder.rollback()
            holder.close()
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
    finally:
        if worker is not None:
            stop(worker)

    lost = runs[2:5]
    progress = bulk_progress(job.pk)
    assert progress.counts == {"done": 2, "not_visible": 3}, progress.counts
    assert progress.skipped == 1  # the run another person resumed
    for run in lost:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    assert set(BulkOutcome.objects.filter(job=job, outcome="not_visible")
               .values_list("message", flat=True)) == {""}

    client.force_login(olga)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "5 of 6 runs handled. 1 not acted on: when reached, each no longer matched the " \
           "filter (moved on meanwhile). 3 not acted on: when reached, each was no longer " \
           "visible to olga (a permission taken away since the job started); they are not " \
           "named." in page, page
    for run in lost:
        assert f"#{run.pk}<" not in page and reverse("console:run", args=[run.pk]) not in page

    out = io.StringIO()
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    call_command("bulk_action", "show", str(job.pk), "--user", "olga", "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert (shown["skipped"], shown["outcomes"]) == (1, {"done": 2, "not_visible": 3})


def test_a_job_started_before_its_persons_sight_was_kept_counts_them_as_before(
        client, monkeypatch):
    """A job of the release before (no sight kept) lists each batch among the runs its
    person may see then: a run they lost sight of is counted as skipped, as it was."""
    from approvals import bulk
    from approvals.bulk import run_bulk_job

    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    operators = Group.objects.get(name="operators")
    olga.groups.add(operators)
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    monkeypatch.setattr(bulk, "BATCH", 2)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 9")
    BulkJob.objects.filter(pk=job.pk).update(sight=None)
    run_bulk_job(job.pk, batches=1)
    olga.groups.remove(operators)

    job = run_bulk_job(job.pk)

    progress = bulk_progress(job.pk)
    assert job.status == "done" and progress.counts == {"done": 2}
    assert progress.skipped == 1
    assert Run.objects.get(pk=runs[2].pk).status == RunStatus.ATTENTION
    client.force_login(olga)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "2 of 3 runs handled. 1 not acted on: when reached, each no longer matched the " \
           "filter (moved on meanwhile) or was no longer visible to olga" in page
    assert f"#{runs[2].pk}<" not in page
