"""A pass of the approvals sweep reads the waits new since the last pass and the requests
due now, never every pending request: with thousands pending and nothing due, it reads as
many rows as with a handful. Every wait and every pending request is looked at once every
sweep_scope.FULL_LOOK_EVERY: what no position or due time shows is found then."""

import pytest

from approvals import schedule
from approvals.models import ApprovalRequest, RequestStatus
from approvals.sweep_scope import FULL_LOOK_EVERY
from audit.chain import Actor
from runs.machine import transitions
from runs.models import Run, RunStatus
from tests.approvals.conftest import later, open_request, waiting_run
from tests.approvals.scale import add_requests, rows_read_by_a_sweep

pytestmark = pytest.mark.django_db

OPS = Actor.system("ops")
# The tables a pass compares, and those it looks up for the rows it compares.
TABLES = ("approvals_approvalrequest", "runs_approvalwait", "runs_run", "runs_step",
          "runs_toolcall")


def _rows_read_by_a_pass(now) -> int:
    report, read = rows_read_by_a_sweep(now, TABLES)
    assert not any(report.as_dict().values()), report  # nothing was due
    return read


def test_a_pass_reads_as_many_rows_with_200_requests_pending_as_with_5(approvers, t0):
    template = open_request(waiting_run())
    add_requests(template, pending=4, workflows=1)
    schedule.sweep(now=t0)  # the first pass: a full look, and the waits' position
    few = _rows_read_by_a_pass(t0)

    add_requests(template, pending=195, workflows=3, prefix="more")
    assert ApprovalRequest.objects.filter(status=RequestStatus.PENDING).count() == 200
    schedule.sweep(now=t0)  # reads the 195 new waits once, and moves past them
    many = _rows_read_by_a_pass(t0)

    assert many == few, (few, many)


def test_a_request_whose_run_ended_with_no_timer_due_is_withdrawn_by_the_next_full_look(
        pending, t0):
    schedule.sweep(now=t0)
    transitions.terminate(pending.run_id, actor=OPS, reason="not needed")
    assert schedule.sweep(now=later(t0, seconds=FULL_LOOK_EVERY.total_seconds())) \
        .withdrawn == 1
    pending.refresh_from_db()
    assert pending.status == RequestStatus.WITHDRAWN
    assert "the run ended: it was terminated" in pending.comment


def test_a_due_request_whose_run_ended_is_withdrawn_between_full_looks_never_timed_out(
        pending):
    schedule.sweep(now=later(pending.due_at, seconds=-30))  # a full look, not due yet
    transitions.terminate(pending.run_id, actor=OPS, reason="not needed")
    report = schedule.sweep(now=later(pending.due_at, seconds=1))
    assert (report.withdrawn, report.timed_out, report.escalated) == (1, 0, 0)
    pending.refresh_from_db()
    assert pending.status == RequestStatus.WITHDRAWN and pending.decided_at is None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.TERMINATED


def test_a_wait_begun_after_a_full_look_is_asked_by_the_next_pass(approvers, t0):
    first = open_request(waiting_run())
    schedule.sweep(now=t0)
    second = waiting_run()
    assert schedule.sweep(now=later(t0, seconds=1)).opened == 1
    assert set(ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
               .values_list("run_id", flat=True)) == {first.run_id, second.pk}
