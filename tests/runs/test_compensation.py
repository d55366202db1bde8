"""Compensation: a business action per completed step, newest first, each with its own key,
each audited; by policy only for low-impact steps; a failure is never a clean rollback."""

import pytest

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError, TransitionNotAllowed, UnknownOutcome
from runs.machine.keys import compensation_key
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, step

pytestmark = pytest.mark.django_db


def _undo_order(run):
    return list(AuditRecord.objects.filter(run=run, action="compensation_succeeded")
                .order_by("seq").values_list("step_name", flat=True))


def test_a_late_failure_undoes_earlier_effects_in_reverse_order_by_policy(script):
    script.plan["book-shipment"] = [PermanentError("carrier refused the parcel")]
    run = new_run("test-saga", order="o-1")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    assert _undo_order(run) == ["charge-card", "reserve-stock"]
    for name in ("reserve-stock", "charge-card"):
        s = step(run, name)
        assert s.status == StepStatus.COMPENSATED and s.compensation_ref == f"undo-{name}"
        assert s.remote_ref  # the original evidence stays
        assert s.compensation_key == compensation_key("test-saga", run.business_key, name, 1)
        assert s.compensation_key != s.idempotency_key
    assert step(run, "book-shipment").status == StepStatus.FAILED
    assert len(script.compensations) == 2
    started = AuditRecord.objects.get(run=run, action="compensation_started")
    assert started.data["order"] == ["charge-card", "reserve-stock"]
    assert "automatic" in started.reason


def test_an_unknown_outcome_never_starts_automatic_compensation(script):
    script.plan["book-shipment"] = [UnknownOutcome("timeout after send")]
    run = new_run("test-saga", order="o-2")
    # book-shipment has no reconcile and its receiver does not honour keys: a person decides.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert script.compensations == {}
    with pytest.raises(TransitionNotAllowed, match="settle book-shipment first"):
        transitions.compensate(run.pk, actor=SYSTEM, reason="undo")


def test_high_impact_steps_are_compensated_only_by_a_person(script):
    # test-orders has no automatic policy; post-ledger is high impact anyway.
    script.plan["post-ledger"] = [PermanentError("ledger closed")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert script.compensations == {}
    transitions.compensate(run.pk, actor=SYSTEM, reason="invoice withdrawn by vendor")
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPENSATING
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    assert _undo_order(run) == ["create-task"]
    assert step(run, "post-ledger").status == StepStatus.FAILED


def test_a_failed_compensation_leaves_the_run_compensation_failed_never_compensated(script):
    script.plan["book-shipment"] = [PermanentError("refused")]
    script.plan["reserve-stock:compensate"] = [PermanentError("stock system says no")]
    run = new_run("test-saga", order="o-3")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.COMPENSATION_FAILED
    assert "reserve-stock" in run.status_message and "stock system says no" in run.status_message
    assert step(run, "charge-card").status == StepStatus.COMPENSATED
    assert step(run, "reserve-stock").status == StepStatus.COMPENSATION_FAILED
    assert not AuditRecord.objects.filter(run=run, action="compensated").exists()
    # A person tries again: the failed compensation is resent with its own, same key.
    transitions.compensate(run.pk, actor=SYSTEM, reason="stock system fixed")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    keys = [k for name, k, _ in script.calls if name == "reserve-stock:compensate"]
    assert len(keys) == 2 and len(set(keys)) == 1
    assert [name for name, _, _ in script.calls].count("charge-card:compensate") == 1


def test_a_transient_compensation_error_is_retried_by_the_steps_policy(script):
    script.plan["book-shipment"] = [PermanentError("refused")]
    script.plan["charge-card:compensate"] = [TransientError("503")]
    run = new_run("test-saga", order="o-4")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATING
    run.refresh_from_db()
    assert run.next_wake_at is not None and run.lease_owner == ""
    assert step(run, "charge-card").status == StepStatus.COMPENSATING
    lease = transitions.claim_run(run.pk, worker="w2", now=run.next_wake_at)
    assert lease.compensating and lease.work.name == "charge-card"
    assert lease.work.compensation_attempt == 2


def test_compensate_is_refused_when_nothing_completed(script):
    run = new_run()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.ATTENTION)
    with pytest.raises(TransitionNotAllowed, match="no completed step"):
        transitions.compensate(run.pk, actor=SYSTEM, reason="undo")
