"""A bulk job acts on each run in its person's name, by the permission rule at that run
(runs.permissions.run_access): a person whose account is deactivated while their job runs,
or whose superuser status is taken away, has no further run acted on in their name, as a
person removed from the group that gave them the permission has none. A real Celery worker
works the job; it is held at the third run (another session holds its row) while the
account changes, then goes on: the runs before the change are done, the ones after it are
refused as forbidden (or, of a superuser no longer one, who may not see them either,
counted as no longer visible to them: approvals.bulk_sight), terminated by nobody, with no
audit record naming the person.

The worker reads the person once per batch of runs (up to 200): the account's state must
be read with each run's permission, not from that object, or every run left in the batch
is acted on in the name of an account that may no longer act."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
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


def operator() -> User:
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    return olga


def superuser() -> User:
    return User.objects.create_superuser("root", password="x")


# Each change, with what became of the five runs. A deactivated account is refused every
# action as forbidden, saying why; the third run's check was read before the change (its
# statement waited for the row). A superuser no longer one may no longer see the runs
# either: seen again with the third run locked (approvals.bulk_sight), it is not acted on,
# and they are counted as no longer visible to them, never named.
CHANGES = {
    "deactivated": (operator, {"is_active": False}, {"done": 3, "forbidden": 2}),
    "no longer a superuser": (superuser, {"is_superuser": False},
                              {"done": 2, "not_visible": 3}),
}


@pytest.mark.parametrize("change", CHANGES)
def test_the_runs_after_the_change_are_refused_and_name_nobody(change, tmp_path):
    make_person, account_change, expected = CHANGES[change]
    person = make_person()
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(5)]
    held_run = runs[2]
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [held_run.pk])
    worker = None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=person, reason="incident 9")
            # DB_LOCK_TIMEOUT=0: the worker waits for the held row as long as it is held.
            worker = start_worker("bulk", tmp_path, DB_LOCK_TIMEOUT=0)
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=held_run.pk).exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the worker to act on two runs and wait for the third's row")
            User.objects.filter(pk=person.pk).update(**account_change)
        finally:
            holder.rollback()
            holder.close()
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
    finally:
        if worker is not None:
            stop(worker)

    acted, refused = runs[:expected["done"]], runs[expected["done"]:]
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert bulk_progress(job.pk).counts == expected, outcomes
    for run in acted:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    for run in refused:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, actor_user_id=person.pk).exists()
        assert not AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .exists()
    assert AuditRecord.objects.filter(actor_user_id=person.pk).count() == expected["done"]
