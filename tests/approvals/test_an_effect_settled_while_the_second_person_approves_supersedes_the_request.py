"""A four-eyes request shows the second person the high-impact effects that stand or may
stand; an approval applies only to what it showed. When another operator settles one of
those effects at the very moment the second person approves (the settlement holds the run's
lock, the decision waits for it), the decision must still find that the effects changed:
the request is superseded and nothing is terminated. Before, the effects were compared as
read before the run was locked, so the approval terminated a run whose ledger entry had
meanwhile been found posted, which the approver was never shown."""

import threading
import uuid

import pytest
from django.db import connection, transaction

from approvals import decisions, four_eyes
from approvals.models import ApprovalRequest, RequestStatus
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.definitions.definition import Found
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.approvals.run_lock_order import blocked_on_a_lock
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)

CARL = Actor(kind=AuditRecord.ActorKind.USER, label="carl", user_id=None)


def _ledger_unknown() -> Run:
    return place(new_run(), status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.UNKNOWN})


def test_the_approval_meets_the_effects_as_they_are_once_the_run_is_its_own(operators):
    olga, omar = operators
    run = _ledger_unknown()
    request, created = four_eyes.request_operator_action(
        run, action="terminate", requested_by=olga, reason="order withdrawn")
    assert created
    assert request.snapshot["high_impact_effects"] == [
        "post-ledger: outcome unknown: may have happened"]

    settled, release, answers = threading.Event(), threading.Event(), []

    def carl_settles_the_ledger():
        # An operator's reconcile, as operator_actions.act takes it: the run locked first,
        # the transition in that transaction, committed once the decision waits for it.
        try:
            with transaction.atomic(durable=True):
                locked = store.current().lock_run(run.pk)
                with transitions.within_caller_transaction(locked=locked):
                    transitions.reconcile(run.pk, step_name="post-ledger",
                                          verdict=Found("LE-7"), actor=CARL,
                                          reason="entry found in the ledger",
                                          evidence="ledger UI shows LE-7")
                settled.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    def omar_approves():
        try:
            answers.append(decisions.decide(request.pk, user=omar, approved=True,
                                            comment="agreed", decision_id=uuid.uuid4()))
        finally:
            connection.close()

    settling = threading.Thread(target=carl_settles_the_ledger)
    settling.start()
    assert settled.wait(timeout=30)
    deciding = threading.Thread(target=omar_approves)
    deciding.start()
    try:
        assert blocked_on_a_lock(), "the decision never waited for the run"
    finally:
        release.set()
        settling.join(timeout=30)
        deciding.join(timeout=30)

    (answer,) = answers
    assert answer.outcome == "superseded", answer.message
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED  # the reconcile's: nothing terminated it
    assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    request.refresh_from_db()
    assert request.status == RequestStatus.SUPERSEDED and request.decided_by is None
    new = ApprovalRequest.objects.get(pk=request.superseded_by_id)
    assert new.status == RequestStatus.PENDING
    assert new.snapshot["high_impact_effects"] == ["post-ledger: succeeded"]
