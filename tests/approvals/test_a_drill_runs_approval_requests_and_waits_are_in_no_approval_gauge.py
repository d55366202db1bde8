"""A drill breaks runs on purpose, so the approvals its runs wait for are in no gauge an
alert reads, as their retries and steps are in no figure: durable_approvals_pending,
durable_approvals_overdue and durable_approval_waits_unasked_oldest_seconds counted a drill
run's requests and waits. A real run's still count, and a bulk job's request counts
whatever run it hangs on (the first it acts on, a drill's here)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import requests
from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest, RequestStatus
from console.roles import ensure_roles
from runs import store
from runs.execution import executor
from runs.models import ApprovalWait, Run, RunStatus
from runs.reads.selectors import RunFilters
from tests.api.test_metrics import scrape, value
from tests.approvals.bulk_requests import EFFECTS
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db
UNASKED = "durable_approval_waits_unasked_oldest_seconds"


def gauges(client) -> tuple:
    samples = scrape(client)
    return (value(samples, "durable_approvals_pending"),
            value(samples, "durable_approvals_overdue"), value(samples, UNASKED))


def waiting(*, drill: bool) -> Run:
    """A test-approval run at its approval step, waiting an hour already, nobody asked."""
    run = new_run("test-approval", wake=False, drill=drill)
    executor.advance_run(run.pk, worker="drill" if drill else "w1", drill=drill)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING, run.status_message
    ApprovalWait.objects.filter(run=run).update(
        created_at=store.current().now() - timedelta(hours=1))
    return run


def asked_and_overdue(run: Run) -> ApprovalRequest:
    assert requests.open_pending_requests() >= 1
    request = ApprovalRequest.objects.get(run=run, status=RequestStatus.PENDING)
    ApprovalRequest.objects.filter(pk=request.pk).update(
        due_at=store.current().now() - timedelta(minutes=1))
    return request


def test_a_drill_runs_wait_and_request_are_in_no_gauge_a_real_runs_are(client, approvers):
    assert gauges(client) == (0, 0, 0)

    drilled = waiting(drill=True)
    assert gauges(client) == (0, 0, 0)
    asked_and_overdue(drilled)
    assert ApprovalRequest.objects.filter(status=RequestStatus.PENDING).count() == 1
    assert gauges(client) == (0, 0, 0)

    real = waiting(drill=False)
    pending, overdue, unasked = gauges(client)
    assert (pending, overdue) == (0, 0)
    assert unasked == pytest.approx(3600, abs=60)
    asked_and_overdue(real)
    assert gauges(client) == (1, 1, 0)


def test_a_bulk_jobs_request_hanging_on_a_drill_run_is_counted(client):
    ensure_roles(Group, Permission)
    operator = User.objects.create_user("carl")
    operator.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(drill=drill), status=RunStatus.ATTENTION,
                  step_statuses=EFFECTS["test-orders"]) for drill in (True, False)]
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION, drills=True),
                            user=operator, reason="incident 42")
    job = run_bulk_job(job.pk)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.run_id == runs[0].pk and request.bulk_runs == [r.pk for r in runs]
    assert request.status == RequestStatus.PENDING

    assert gauges(client)[0] == 1
