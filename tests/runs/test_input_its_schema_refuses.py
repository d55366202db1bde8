"""A run whose input its workflow version's schema no longer accepts (the schema was changed
without a new version) waits for a person at its claim, saying which fields and why, instead
of failing in each worker that claims it until the take-backs count it. Nothing is called,
no value of the input is written into the message or the audit trail, and once a schema
that accepts the input is deployed, resume runs it to the end, each step once."""

import pytest
from pydantic import BaseModel, field_validator

from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.guidance import recommend
from runs.operator.investigation import investigate
from runs.operator.reconciliation import reconcile_step
from tests.factories import SYSTEM, new_run, place, step
from tests.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.django_db


class OrderWithCurrency(BaseModel):
    """test-orders' schema as a later release changed it, keeping the version number."""
    order: str
    amount: int = 100
    currency: str


def test_a_run_its_schema_no_longer_accepts_waits_for_a_person_at_its_claim(
        script, monkeypatch):
    run = new_run()
    # Deployed after the run started.
    monkeypatch.setattr(registry.get("test-orders", 1), "input_schema", OrderWithCurrency)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.INPUT_REJECTED
    assert run.status_message == ("test-orders v1 no longer accepts this run's input: "
                                  "currency: Field required")
    assert run.lease_owner == "" and run.lease_expires_at is None
    # Nothing was attempted: no call, no step started, no intent written.
    assert script.calls == []
    assert all(s.status == StepStatus.PENDING and s.attempt == 0 for s in run.steps.all())
    assert AuditRecord.objects.filter(run=run, action="input_rejected").count() == 1
    assert not AuditRecord.objects.filter(run=run, action="claimed").exists()
    advice = recommend(run, list(run.steps.all()))
    assert advice.meant == "resume" and "no longer accepts" in advice.why

    # Resumed before the fix, it comes back here at the next claim: never a loop of claims.
    transitions.resume(run.pk, actor=SYSTEM, reason="tried before the fix")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert script.calls == []

    # A release whose schema accepts the input again, then resume: each step once.
    monkeypatch.undo()
    transitions.resume(run.pk, actor=SYSTEM, reason="schema fixed")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert sorted(script.calls) == sorted(set(script.calls))
    assert step(run, "create-task").attempt == 1


def test_the_message_names_the_fields_never_their_values(script):
    run = new_run()
    # An input the schema refuses, holding something that must not reach the audit trail.
    Run.objects.filter(pk=run.pk).update(
        input={"order": ["sk-live-abcdef123456"], "amount": "sk-live-abcdef123456"})
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.INPUT_REJECTED
    assert "order: Input should be a valid string" in run.status_message
    assert "amount: Input should be a valid integer" in run.status_message
    assert "sk-live" not in run.status_message
    for record in AuditRecord.objects.filter(run=run):
        assert "sk-live" not in f"{record.before} {record.after} {record.data}"
    assert script.calls == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_broker")
def test_a_real_worker_sends_it_to_a_person_at_once_not_after_its_lease(tmp_path):
    run = new_run()  # its wake-up hint waits in the broker for the worker below
    Run.objects.filter(pk=run.pk).update(input={"order": run.business_key, "amount": "many"})
    worker = start_worker("schema-worker", tmp_path, RUNS_LEASE_SECONDS=300)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION,
                 timeout=60, what="the run to wait for a person")
    finally:
        stop(worker)
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.INPUT_REJECTED
    assert "amount: Input should be a valid integer" in run.status_message
    # The worker let go of it: no lease for the sweeper to wait out, nothing attempted.
    assert run.lease_expires_at is None
    assert all(s.attempt == 0 for s in run.steps.all())


def test_a_lookup_by_key_with_it_is_refused_with_the_reason_and_nothing_is_asked(
        script, monkeypatch):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    monkeypatch.setattr(registry.get("test-orders", 1), "input_schema", OrderWithCurrency)
    with pytest.raises(TransitionNotAllowed,
                       match="no longer accepts this run's input .currency: Field required."):
        reconcile_step(run.pk, step_name="create-task", actor=SYSTEM, reason="look it up")
    # The investigation says what it could not confirm instead of failing.
    card = investigate(run, lookups=True)
    assert any("create-task" in line and "no longer accepts" in line
               for line in card.unconfirmed), card.unconfirmed
    assert script.reconcile_calls == []
    assert step(run, "create-task").status == StepStatus.UNKNOWN


@pytest.mark.parametrize("cause", ["input", "definition"])
def test_a_run_held_while_undoing_goes_on_undoing_never_forward(script, monkeypatch, cause):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.SUCCEEDED})
    transitions.compensate(run.pk, actor=SYSTEM, reason="the order was withdrawn")
    if cause == "input":
        monkeypatch.setattr(registry.get("test-orders", 1), "input_schema", OrderWithCurrency)
    else:
        Run.objects.filter(pk=run.pk).update(workflow_version=99)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    run.refresh_from_db()
    assert run.attention_reason == (AttentionReason.INPUT_REJECTED if cause == "input"
                                    else AttentionReason.DEFINITION_MISSING)
    assert script.calls == []
    advice = recommend(run, list(run.steps.all()))
    assert advice.meant == "compensate" and "compensate to go on undoing" in advice.why

    monkeypatch.undo()
    Run.objects.filter(pk=run.pk).update(workflow_version=1)
    transitions.compensate(run.pk, actor=SYSTEM, reason="fixed; go on undoing")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    # Only the undo ran: nothing of the run went forward again.
    assert [c[0] for c in script.calls] == ["create-task:compensate"]
    assert step(run, "post-ledger").attempt == 0


class OrderCheckedByItsOwnCode(BaseModel):
    """A later schema whose own check quotes the value it refuses, and a dict keyed by
    what the input chose."""
    order: str
    amount: int = 100
    accounts: dict[str, int] = {}

    @field_validator("order")
    @classmethod
    def company_orders_only(cls, value):
        raise ValueError(f"{value} is not a company order")


def test_what_the_schemas_own_code_or_the_inputs_own_keys_would_quote_is_not_stored(
        script, monkeypatch):
    run = new_run()
    Run.objects.filter(pk=run.pk).update(
        input={"order": "jane.doe@private.example", "accounts": {"DE44500105175407324931": "x"}})
    monkeypatch.setattr(registry.get("test-orders", 1), "input_schema",
                        OrderCheckedByItsOwnCode)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.status_message == (
        "test-orders v1 no longer accepts this run's input: order: refused by the schema's "
        "own check; accounts.[key]: Input should be a valid integer, unable to parse string "
        "as an integer")
    for record in AuditRecord.objects.filter(run=run):
        stored = f"{record.before} {record.after} {record.data}"
        assert "jane.doe" not in stored and "DE4450" not in stored
