"""A wait whose request fails to open for a reason nobody can tell from a passing one (here
the database refuses the request's row, for ever) is tried again at each pass, with one
traceback in the log, not one a pass. Once it has failed five times in a row over at least
two minutes its run is held for a person, saying the error, and the sweep's position moves
past it; other runs' requests open all along. A failure that passes holds nothing, and a
success starts the count afresh. Resumed once the fault is mended, the run is asked for."""

import logging
from datetime import timedelta

import pytest
from django.db import connection

from approvals import requests, schedule
from approvals.models import ApprovalRequest, RequestStatus
from approvals.open_failures import HELD_AFTER, HELD_AFTER_FAILURES
from approvals.sweep_scope import ASKED_JOB
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import ApprovalWait, AttentionReason, PassPosition, RunStatus
from tests.agent_runs import LARGE, advance, start_triage
from tests.approvals.conftest import later, waiting_run
from tests.factories import SYSTEM


def _refuse_requests_of(run_id: int) -> None:
    """The database refuses every approval request row of run `run_id` (SQLSTATE XX000,
    an internal error: neither a lost connection nor anything the code knows)."""
    with connection.cursor() as cursor:
        cursor.execute(f"""
            CREATE FUNCTION refuse_request() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.run_id = {int(run_id)} THEN
                RAISE EXCEPTION 'approvals storage refuses the row' USING ERRCODE = 'XX000';
              END IF;
              RETURN NEW;
            END $$;
            CREATE TRIGGER refuse_request BEFORE INSERT ON approvals_approvalrequest
              FOR EACH ROW EXECUTE FUNCTION refuse_request();""")


def _mend() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS refuse_request ON approvals_approvalrequest; "
                       "DROP FUNCTION IF EXISTS refuse_request()")


def _position() -> int:
    """The sweep's position: every wait up to it has had its request."""
    kept = PassPosition.objects.filter(job=ASKED_JOB).values_list("after_id", flat=True)
    return kept.first() or 0


def _tracebacks(caplog) -> int:
    return sum(1 for r in caplog.records if r.exc_info)


@pytest.mark.django_db
def test_a_step_wait_whose_request_never_opens_holds_its_run_for_a_person(
        approvers, t0, caplog):
    broken = waiting_run()
    _refuse_requests_of(broken.pk)
    others = []

    with caplog.at_level(logging.INFO):
        # Five failures in as many seconds: not yet (a failure of a few seconds, under a
        # fast sweep, is not one that lasts).
        for at in [later(t0, seconds=n) for n in range(5)]:
            others.append(waiting_run())
            report = schedule.sweep(now=at)
            # Each pass opens the newer run's request past the failing wait.
            assert report.opened == 1
            assert ApprovalRequest.objects.filter(run=others[-1],
                                                  status=RequestStatus.PENDING).exists()
        broken.refresh_from_db()
        assert broken.status == RunStatus.WAITING
        wait = ApprovalWait.objects.get(run=broken)
        assert (wait.open_failures, wait.failing_since) == (5, t0)
        # The sweep's position stays below it while it may yet open.
        assert _position() < wait.pk
        # One traceback, then a line a pass.
        assert _tracebacks(caplog) == 1
        assert caplog.text.count("not opened again") == HELD_AFTER_FAILURES - 1

        # The sixth, over two minutes after the first: held.
        assert HELD_AFTER_FAILURES <= 6 and HELD_AFTER <= timedelta(seconds=200)
        schedule.sweep(now=later(t0, seconds=200))

    broken.refresh_from_db()
    assert (broken.status, broken.attention_reason) == (RunStatus.ATTENTION,
                                                        AttentionReason.APPROVAL_UNASKABLE)
    assert broken.status_message.startswith(
        "approve: no approval request can be made: the request failed to open 6 times in a "
        "row since ")
    assert "(InternalError: approvals storage refuses the row)" in broken.status_message
    assert AuditRecord.objects.filter(run=broken, action="approval_unaskable").count() == 1
    assert not ApprovalRequest.objects.filter(run=broken).exists()
    assert not ApprovalWait.objects.filter(run=broken).exists()
    assert _tracebacks(caplog) == 1
    # Every other run was asked, once each, and the position passed the held wait.
    assert ApprovalRequest.objects.filter(run__in=others).count() == len(others)
    assert _position() >= wait.pk

    # Mended and resumed: it waits again, on a new count, and is asked for once.
    _mend()
    transitions.resume(broken.pk, actor=SYSTEM, reason="storage mended")
    assert advance(broken).status == RunStatus.WAITING
    assert ApprovalWait.objects.get(run=broken).open_failures == 0
    assert schedule.sweep(now=later(t0, seconds=260)).opened == 1
    assert ApprovalRequest.objects.filter(run=broken, status=RequestStatus.PENDING).count() == 1
    assert AuditRecord.objects.filter(run=broken, action="approval_unaskable").count() == 1


@pytest.mark.django_db
def test_a_failure_that_passes_holds_nothing_and_a_success_starts_the_count_afresh(
        approvers, t0):
    run = waiting_run()
    _refuse_requests_of(run.pk)
    for seconds in (0, 60, 120, 180):
        assert requests.open_pending_requests(now=later(t0, seconds=seconds)) == 0
    assert ApprovalWait.objects.get(run=run).open_failures == 4
    _mend()
    assert requests.open_pending_requests(now=later(t0, seconds=240)) == 1
    wait = ApprovalWait.objects.get(run=run)
    assert (wait.open_failures, wait.failing_since) == (0, None)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action="approval_unaskable").exists()


@pytest.mark.django_db(transaction=True)
def test_a_tool_call_wait_whose_request_never_opens_holds_its_run_and_posts_nothing(
        approvers, t0, live_sandbox):
    from demo.sandbox.models import LedgerEntry

    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    (call,) = transitions.waiting_tool_calls(run)
    _refuse_requests_of(run.pk)
    try:
        for seconds in range(0, 120, 30):
            assert requests.open_pending_requests(now=later(t0, seconds=seconds)) == 0
        assert ApprovalWait.objects.get(tool_call=call).open_failures == 4
        run.refresh_from_db()
        assert run.status == RunStatus.WAITING
        # The fifth, two minutes after the first.
        assert requests.open_pending_requests(now=later(t0, seconds=120)) == 0
    finally:
        _mend()
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.APPROVAL_UNASKABLE)
    assert run.status_message.startswith(f"triage tool call {call.ref}: no approval request "
                                         f"can be made: the request failed to open 5 times")
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert held.data["tool_call"] == call.ref
    assert not ApprovalRequest.objects.filter(run=run).exists()
    assert not LedgerEntry.objects.exists()


@pytest.mark.django_db
def test_a_failure_that_cannot_even_be_counted_holds_no_other_wait_back(approvers, t0):
    broken, other = waiting_run(), waiting_run()
    _refuse_requests_of(broken.pk)
    with connection.cursor() as cursor:
        # The wait's own row refuses the count too.
        cursor.execute("""
            CREATE FUNCTION refuse_count() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'waits storage refuses the row' USING ERRCODE = 'XX000';
            END $$;
            CREATE TRIGGER refuse_count BEFORE UPDATE ON runs_approvalwait
              FOR EACH ROW EXECUTE FUNCTION refuse_count();""")

    assert requests.open_pending_requests(now=t0) == 1
    assert ApprovalRequest.objects.filter(run=other, status=RequestStatus.PENDING).exists()
    broken.refresh_from_db()
    assert broken.status == RunStatus.WAITING
    assert ApprovalWait.objects.get(run=broken).open_failures == 0
