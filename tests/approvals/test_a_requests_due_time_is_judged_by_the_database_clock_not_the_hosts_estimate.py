"""Whether an approval request is past its due time is judged by the database's clock, read
as its run is locked, not by this process's estimate of that clock (its own clock plus an
offset measured every 30 s, which runs ahead or behind for a while after its clock stepped):
by a person's decision and by the sweep alike. A decision made 10 s before the due time on
a host whose estimate runs 30 s ahead is recorded and applied, and the run goes on once;
the sweep on such a host times out nothing before the due time, and times the request out
once after it; one whose run stopped waiting for it is withdrawn, never timed out, even when
it is due by the database's clock but not by this process's estimate."""

import uuid
from datetime import timedelta

import pytest
from django.db import connection

from approvals import decisions, schedule
from approvals.models import ApprovalRequest, RequestStatus
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.factories import step

pytestmark = pytest.mark.django_db
AHEAD = timedelta(seconds=30)


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _due_in(request, delta: timedelta):
    """Make `request` due `delta` from now by the database's clock; its due time."""
    due = _server_now() + delta
    ApprovalRequest.objects.filter(pk=request.pk).update(due_at=due)
    return due


def _estimate_off_by(monkeypatch, offset: timedelta) -> None:
    """This process's estimate of the database's clock is `offset` off it (as for a while
    after this host's clock stepped, until the offset is measured again)."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + offset)


@pytest.fixture
def estimate_ahead(monkeypatch):
    _estimate_off_by(monkeypatch, AHEAD)


def _records(run_id, action):
    return AuditRecord.objects.filter(run_id=run_id, action=action)


def _nothing_done(report):
    return (report.timed_out, report.escalated, report.withdrawn) == (0, 0, 0)


@pytest.mark.usefixtures("estimate_ahead")
def test_a_decision_made_before_the_due_time_is_applied_on_a_host_whose_estimate_runs_ahead(
        pending, ann, script):
    due = _due_in(pending, timedelta(seconds=10))

    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                              comment="fine")

    assert result.outcome == "recorded", result.message
    pending.refresh_from_db()
    assert pending.status == RequestStatus.APPROVED
    assert (pending.decided_by, pending.due_at) == (ann, due)
    # Dated by the database's clock it was judged by: before the due time.
    assert pending.decided_at < due
    assert pending.settled_at is not None and pending.apply_error == ""
    (decided,) = _records(pending.run_id, "approval_decided")
    assert (decided.actor_kind, decided.actor_label) == ("user", "ann")
    assert decided.data["approved"] is True
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED

    # The run goes on once; neither its end nor a later sweep times the request out.
    assert executor.advance_run(pending.run_id, worker="w1") == RunStatus.COMPLETED
    ApprovalRequest.objects.filter(pk=pending.pk).update(due_at=_server_now()
                                                         - timedelta(seconds=1))
    assert _nothing_done(schedule.sweep())
    assert [c[0] for c in script.calls].count("pay") == 1
    assert _records(pending.run_id, "approval_decided").count() == 1
    assert not _records(pending.run_id, "approval_timed_out").exists()
    pending.refresh_from_db()
    assert (pending.status, pending.decided_by) == (RequestStatus.APPROVED, ann)


@pytest.mark.usefixtures("estimate_ahead")
def test_the_sweep_on_a_host_whose_estimate_runs_ahead_times_out_only_after_the_due_time(
        pending, script):
    run_id = pending.run_id
    _due_in(pending, timedelta(seconds=10))

    assert _nothing_done(schedule.sweep())
    assert _nothing_done(schedule.sweep())
    pending.refresh_from_db()
    assert pending.status == RequestStatus.PENDING
    assert (pending.decided_at, pending.decided_by_label) == (None, "")
    assert not _records(run_id, "approval_decided").exists()
    assert Run.objects.get(pk=run_id).status == RunStatus.WAITING
    assert step(Run.objects.get(pk=run_id), "approve").status == StepStatus.WAITING

    # Once the due time has passed by the database's clock, it is timed out, once.
    _due_in(pending, -timedelta(seconds=1))
    report = schedule.sweep()
    assert (report.timed_out, report.escalated, report.withdrawn) == (1, 0, 0)
    assert _nothing_done(schedule.sweep())
    pending.refresh_from_db()
    assert pending.status == RequestStatus.REJECTED and pending.decided_by is None
    assert pending.decided_by_label == "approvals"
    (decided,) = _records(run_id, "approval_decided")
    assert (decided.actor_kind, decided.actor_label) == ("system", "approvals")
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.APPROVAL_REJECTED)
    assert "pay" not in [c[0] for c in script.calls]


@pytest.mark.parametrize("finds_it", [schedule.sweep, schedule.apply_timeouts],
                         ids=["by-the-sweep", "by-its-timeouts-after-its-withdrawal-looked"])
def test_a_request_due_by_the_database_clock_whose_run_ended_is_withdrawn_not_timed_out(
        pending, monkeypatch, finds_it):
    run_id = pending.run_id
    _estimate_off_by(monkeypatch, -AHEAD)
    assert _nothing_done(schedule.sweep())  # the pass's full look: the next ones are not
    transitions.terminate(run_id, actor=Actor.system("ops"), reason="customer cancelled")
    # Due by the database's clock; not yet by this process's estimate. The pass's withdrawal
    # of due requests goes by the database's clock, as its timeouts do; its timeouts, meeting
    # one whose run ended after the withdrawal looked, withdraw it as well.
    _due_in(pending, -timedelta(seconds=1))

    report = finds_it()

    assert (report.withdrawn, report.timed_out, report.escalated) == (1, 0, 0)
    pending.refresh_from_db()
    assert pending.status == RequestStatus.WITHDRAWN
    assert (pending.decided_at, pending.decided_by_label) == (None, "")
    assert pending.comment == "the run ended: it was terminated"
    assert _records(run_id, "approval_withdrawn").count() == 1
    assert not _records(run_id, "approval_decided").exists()
    assert Run.objects.get(pk=run_id).status == RunStatus.TERMINATED
    assert _nothing_done(schedule.sweep())
