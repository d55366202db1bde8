"""An approvals sweep that finds nothing to do costs a few small queries (it runs every few
seconds): it asks first whether any wait lacks a request and whether any request is open,
and skips the parts that would find nothing. Those questions never hide work."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import application, decisions, schedule
from approvals.models import ApprovalRequest, RequestStatus
from audit.chain import Actor
from runs.machine import transitions
from runs.models import Run, RunStatus
from tests.approvals.conftest import later, waiting_run

pytestmark = pytest.mark.django_db


def _approval_queries(ctx) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries
            if "approvals_" in q["sql"] or "runs_approvalwait" in q["sql"]]


def test_an_idle_sweep_asks_three_small_questions_when_no_request_is_open(approvers):
    with CaptureQueriesContext(connection) as ctx:
        report = schedule.sweep()
    assert not any(report.as_dict().values())
    # A wait without a request? An open request? A notification due? Nothing else: not
    # the withdrawal, timeout, reminder and settling queries, and no wait is loaded.
    asked = _approval_queries(ctx)
    assert len(asked) == 3, asked
    assert not any("runs_run" in sql for sql in asked)


def test_a_wait_without_a_request_is_opened_beside_waits_that_have_one(approvers, t0):
    first = waiting_run()
    assert schedule.sweep(now=t0).opened == 1
    second = waiting_run()
    assert schedule.sweep(now=t0).opened == 1
    assert ApprovalRequest.objects.filter(status=RequestStatus.PENDING).count() == 2
    assert set(ApprovalRequest.objects.values_list("run_id", flat=True)) == {first.pk,
                                                                            second.pk}


def test_a_decision_left_unapplied_is_settled_though_no_request_is_pending(
        pending, ann, monkeypatch, t0):
    def worker_died(*args, **kwargs):
        raise RuntimeError("connection to the database lost")

    monkeypatch.setattr(application.transitions, "decide_approval", worker_died)
    decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0)
    monkeypatch.undo()
    assert not ApprovalRequest.objects.filter(status=RequestStatus.PENDING).exists()
    assert schedule.sweep(now=later(t0, seconds=60)).settled == 1
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED


def test_a_pending_request_whose_run_ended_is_withdrawn_by_the_sweep(pending, t0):
    transitions.terminate(pending.run_id, actor=Actor.system("ops"), reason="not needed")
    assert schedule.sweep(now=later(t0, seconds=1)).withdrawn == 1
    pending.refresh_from_db()
    assert pending.status == RequestStatus.WITHDRAWN
