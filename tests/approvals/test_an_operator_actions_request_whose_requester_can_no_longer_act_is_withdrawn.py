"""A four-eyes request for an operator action is taken in its requester's name once
approved: a requester whose account was deactivated after the request was opened (or
between a bulk job's last check of the account and the opening of its request) can have it
taken on no run. Such a request stayed open: approvers were asked to decide it, and an
approval was then refused run by run. It is now no longer awaited, by the one rule of
requests no longer awaited (approvals.withdrawal.no_longer_awaited): the sweep withdraws
it, and so does a person's decision, instead of recording an approval nobody can apply; the
withdrawal is recorded on the run with why; nothing is applied."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, four_eyes
from approvals.bulk import start_bulk_job
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome, RequestStatus
from approvals.schedule import withdraw_stale_requests
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from runs.reads.selectors import RunFilters
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect
from tests.approvals.run_lock_order import session
from tests.processes import start_worker, stop, wait_for

WHY = "olga, who asked for it, can no longer act: their account is no longer active"


def operators() -> tuple[User, User]:
    ensure_roles(Group, Permission)
    group = Group.objects.get(name="operators")
    olga = User.objects.create_user("olga", email="olga@example.com")
    omar = User.objects.create_user("omar", email="omar@example.com", password="pw")
    group.user_set.add(olga, omar)
    return olga, omar


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def deactivate(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


def assert_withdrawn_and_nothing_done(request_id: int, runs: list[Run]) -> None:
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.status == RequestStatus.WITHDRAWN and request.decided_by_id is None
    assert WHY in request.comment, request.comment
    record = AuditRecord.objects.get(run_id=request.run_id, action="approval_withdrawn")
    assert WHY in record.reason, record.reason
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(action="terminated").exists()


def decide_in_the_console(client, omar: User, request_id: int):
    client.force_login(omar)
    return client.post(f"/approvals/{request_id}/decide/",
                       {"decision": "approve", "decision_id": uuid.uuid4()})


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_broker")
def test_a_bulk_request_opened_as_its_persons_account_was_deactivated_is_withdrawn(
        tmp_path, client):
    """A real worker checks olga's account at the job's end, then waits to lock the run
    its request hangs on (another session holds it); olga is deactivated meanwhile, and the
    request is opened in her name. The sweep withdraws it; omar's approval after that is
    not recorded."""
    olga, omar = operators()
    first, second = run_with_an_effect(), run_with_an_effect()
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [second.pk])
    anchor_holder, worker = None, None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=olga, reason="incident 9")
            # DB_LOCK_TIMEOUT=0: the worker waits for a held row as long as it is held.
            worker = start_worker("bulk", tmp_path, DB_LOCK_TIMEOUT=0)
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=first.pk,
                                                        outcome="second_person").exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the worker to reach the first run and wait for the second's row")
            # The run the request will hang on, held now that the worker is done with it.
            anchor_holder = session()
            anchor_holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR "
                                  "UPDATE", [first.pk])
            holder.rollback()
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=second.pk,
                                                        outcome="second_person").exists()
                     and waiting_on_locks() == 1, timeout=60,
                     what="the worker, past its check of the account, to wait for the "
                          "first run's row to open its request")
            deactivate(olga)
        finally:
            holder.rollback()
            holder.close()
            if anchor_holder is not None:
                anchor_holder.rollback()
                anchor_holder.close()
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
    finally:
        if worker is not None:
            stop(worker)
    job = BulkJob.objects.get(pk=job.pk)
    assert job.approval_id is not None  # opened in the name of an account gone inactive

    assert withdraw_stale_requests() == 1

    assert_withdrawn_and_nothing_done(job.approval_id, [first, second])
    response = decide_in_the_console(client, omar, job.approval_id)
    assert response.status_code in (200, 302, 409)
    assert_withdrawn_and_nothing_done(job.approval_id, [first, second])
    assert BulkJob.objects.get(pk=job.pk).phase == "acting"  # never applying


@pytest.mark.django_db
def test_a_bulk_request_whose_person_is_deactivated_is_withdrawn_by_the_decision(client):
    olga, omar = operators()
    runs = [run_with_an_effect() for _ in range(2)]
    job = bulk_terminate(user=olga)
    deactivate(olga)

    response = decide_in_the_console(client, omar, job.approval_id)

    assert response.status_code in (200, 302, 409)
    assert_withdrawn_and_nothing_done(job.approval_id, runs)
    assert BulkJob.objects.get(pk=job.pk).phase == "acting"


@pytest.mark.django_db
def test_a_one_run_request_whose_person_is_deactivated_is_withdrawn_by_the_sweep():
    olga, omar = operators()
    run = run_with_an_effect()
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    deactivate(olga)

    assert withdraw_stale_requests() == 1

    assert_withdrawn_and_nothing_done(request.pk, [run])
    result = decisions.decide(request.pk, user=omar, approved=True, comment="agreed",
                              decision_id=uuid.uuid4())
    assert not result.recorded and WHY in result.message
    assert_withdrawn_and_nothing_done(request.pk, [run])


@pytest.mark.django_db
def test_a_request_whose_person_is_still_active_stays_open():
    olga, omar = operators()
    run = run_with_an_effect()
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    User.objects.filter(pk=omar.pk).update(is_active=False)  # not the requester

    assert withdraw_stale_requests() == 0
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.PENDING
