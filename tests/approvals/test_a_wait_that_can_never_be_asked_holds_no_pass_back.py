"""A wait no request can ever be made for does not hold the sweep's position below it:
held there, every pass would read every wait after it again (and try it again). It is
passed over and still reported: a wait whose step does not wait for a person is counted in
the pass's report and named in a warning by the pass that meets it and by every full look,
its row kept; a wait whose snapshot the database cannot store holds its run for a person
(attention, saying why), as any snapshot that cannot be made does."""

import logging

import pytest

from approvals import schedule
from approvals.models import ApprovalRequest, RequestStatus
from approvals.sweep_scope import FULL_LOOK_EVERY
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.models import ApprovalWait, AttentionReason, Run, RunStatus
from tests.approvals.conftest import later, open_request, waiting_run
from tests.approvals.scale import add_requests, rows_read_by_a_sweep

pytestmark = pytest.mark.django_db

# Waits after the one that can never be asked, each with its request.
LATER_WAITS = 50


def _asking_for_a_new_wait(now) -> int:
    """Rows of the waits read by the pass that asks for one new wait."""
    new = waiting_run()
    report, read = rows_read_by_a_sweep(now, ["runs_approvalwait"])
    assert (report.opened, report.unaskable) == (1, 0), report
    assert ApprovalRequest.objects.filter(run=new, status=RequestStatus.PENDING).exists()
    return read


@pytest.fixture
def asked(approvers, t0):
    """A waiting test-approval run's request, and the first pass (a full look) made."""
    template = open_request(waiting_run())
    schedule.sweep(now=t0)
    return template


def test_a_wait_whose_step_does_not_wait_is_passed_over_and_reported_at_every_full_look(
        asked, t0, caplog):
    alone = _asking_for_a_new_wait(t0)
    # A wait naming a step of its run that does not wait for a person (its "prepare" step
    # succeeded): no transition leaves one today, and the sweep must not depend on that.
    stale = ApprovalWait.objects.create(run_id=asked.run_id, step_name="prepare",
                                        created_at=t0)
    add_requests(asked, pending=LATER_WAITS, workflows=2)
    said = f"wait {stale.pk}: run {asked.run_id} step prepare"

    with caplog.at_level(logging.WARNING, logger="approvals.sweep_scope"):
        met = schedule.sweep(now=t0)
    assert (met.opened, met.unaskable) == (0, 1)
    assert said in caplog.text

    # The next pass reads what is new, not the 51 waits from the one never asked on.
    assert _asking_for_a_new_wait(t0) <= alone

    # Still there and still said, at every full look, while its run waits.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="approvals.sweep_scope"):
        looked = schedule.sweep(now=later(t0, seconds=FULL_LOOK_EVERY.total_seconds()))
    assert (looked.opened, looked.unaskable) == (0, 1)
    assert said in caplog.text
    assert ApprovalWait.objects.filter(pk=stale.pk).exists()
    assert Run.objects.get(pk=asked.run_id).status == RunStatus.WAITING
    assert not ApprovalRequest.objects.filter(run_id=asked.run_id, step_name="prepare").exists()


def test_a_snapshot_the_database_cannot_store_holds_its_run_for_a_person_and_is_passed(
        asked, t0, caplog, monkeypatch):
    alone = _asking_for_a_new_wait(t0)
    spec = registry.get("test-approval", 1).step("approve")
    snapshot = spec.fn
    # One order's snapshot carries a NUL, which no text or jsonb column stores.
    monkeypatch.setattr(spec, "fn", lambda ctx: {"note": "a\x00b"}
                        if ctx.input.order == "nul" else snapshot(ctx))
    held = waiting_run(order="nul")
    add_requests(asked, pending=LATER_WAITS, workflows=2)

    with caplog.at_level(logging.WARNING):
        met = schedule.sweep(now=t0)
    assert (met.opened, met.unaskable) == (0, 0)
    held.refresh_from_db()
    assert (held.status, held.attention_reason) == (RunStatus.ATTENTION,
                                                    AttentionReason.APPROVAL_UNASKABLE)
    assert held.status_message == ("approve: no approval request can be made: approve: the "
                                   "snapshot cannot be stored: NUL characters cannot be "
                                   "stored (at $.note)")
    assert AuditRecord.objects.filter(run=held, action="approval_unaskable").count() == 1
    assert not ApprovalRequest.objects.filter(run=held).exists()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no traceback

    assert _asking_for_a_new_wait(t0) <= alone
    assert AuditRecord.objects.filter(run=held, action="approval_unaskable").count() == 1
