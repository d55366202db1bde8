"""A bulk job's four-eyes request is replaced by a new one when what may have happened in
its runs changes while it waits (approvals.requests.supersede). The job names the request
that decides its waiting runs: the successor, moved in the transaction that closes the
replaced one, so no commit ever shows the job naming a closed request beside a pending one
(nor naming the successor while the replaced request is still pending)."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from approvals.bulk import run_bulk_job
from approvals.decisions import decide
from approvals.four_eyes import changed_effects_snapshot
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome, RequestStatus
from approvals.requests import supersede
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Step, StepStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


class RolledBack(Exception):
    pass


@pytest.fixture
def people(db):
    """olga decides, carl asked."""
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def effects_change(run: Run) -> None:
    """One run's ledger posting turns out unknown: not what the approver was shown."""
    Step.objects.filter(run=run, name="post-ledger").update(status=StepStatus.UNKNOWN)


def approve(request_id: int, user):
    return decide(request_id, user=user, approved=True, decision_id=uuid.uuid4(), comment="ok")


def test_the_job_names_the_request_that_replaced_its_first_and_that_one_ends_its_runs(
        people):
    olga, carl = people
    runs = [run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    first = job.approval_id
    effects_change(runs[1])

    replaced = approve(first, olga)

    assert replaced.outcome == "superseded"
    live = replaced.new_request.pk
    assert BulkJob.objects.get(pk=job.pk).approval_id == live
    assert list(ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
                .values_list("pk", flat=True)) == [live]
    # Nothing was done on the replaced request's approval.
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs])
               .values_list("status", flat=True)) == {RunStatus.ATTENTION}

    assert approve(live, olga).outcome == "recorded"
    run_bulk_job(job.pk)  # the job's worker applies the approval
    # Each run is acted on by the approval of the request the job names (the run whose
    # ledger posting is unknown is ended, and stays with a person until it is settled).
    assert set(BulkOutcome.objects.filter(job=job).values_list("outcome", flat=True)) == {
        BulkOutcome.Outcome.DONE}
    assert Run.objects.get(pk=runs[0].pk).status == RunStatus.TERMINATED
    assert BulkJob.objects.get(pk=job.pk).approval_id == live


def test_the_job_is_moved_in_the_transaction_of_the_supersede(people):
    _, carl = people
    runs = [run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    effects_change(runs[0])
    snapshot, digest = changed_effects_snapshot(job.approval)

    with pytest.raises(RolledBack), transaction.atomic():
        locked = ApprovalRequest.objects.select_for_update().get(pk=job.approval_id)
        new = supersede(locked, snapshot, digest, timezone.now())
        assert BulkJob.objects.get(pk=job.pk).approval_id == new.pk
        raise RolledBack

    assert BulkJob.objects.get(pk=job.pk).approval_id == job.approval_id
    assert ApprovalRequest.objects.get(pk=job.approval_id).status == RequestStatus.PENDING
    assert ApprovalRequest.objects.count() == 1


def test_a_job_that_cannot_name_its_new_request_leaves_no_request(people, transactional_db):
    """The job's request and the job naming it commit together (approvals.bulk): a request
    committed first could be replaced before the job named it, and the job would then name
    the replaced one. Here the database refuses the job's naming of it: no request stands."""
    olga, carl = people
    run_with_an_effect()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_job_naming() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.approval_id IS DISTINCT FROM OLD.approval_id THEN "
            "RAISE EXCEPTION 'job rows refused'; END IF; "
            "RETURN NEW; END $$")
        cursor.execute(f"CREATE TRIGGER refuse_job_naming BEFORE UPDATE ON "
                       f"{BulkJob._meta.db_table} FOR EACH ROW EXECUTE FUNCTION "
                       "refuse_job_naming()")
    try:
        with pytest.raises(DatabaseError, match="job rows refused"):
            bulk_terminate(user=carl)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER refuse_job_naming ON {BulkJob._meta.db_table}")
            cursor.execute("DROP FUNCTION refuse_job_naming()")

    assert not ApprovalRequest.objects.exists()
    assert BulkJob.objects.get().approval_id is None
