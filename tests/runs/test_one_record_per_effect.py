"""One chained record per effect: the intent of an attempt is its step's row, committed
before the effect; the one record that ends the attempt (its outcome, or the take-back of a
dead worker's lease) carries the intent with the outcome. Subscribers' progress events are
read from that record, not written a second time."""

import json
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError
from runs.machine.transitions.attempts import result_digest
from runs.models import RunEvent, RunStatus, Step, StepStatus, ToolCall
from tests.factories import make_due, new_run, step
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db


@pytest.fixture
def script():
    from tests.workflows import script

    return script


def _actions(run) -> Counter:
    return Counter(AuditRecord.objects.filter(run=run).values_list("action", flat=True))


def test_each_step_writes_one_record_and_no_intent_record(script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    steps = list(Step.objects.filter(run=run))
    # The run's own records (started, claimed, completed) and one per step effect.
    assert _actions(run) == Counter({"started": 1, "claimed": 1, "succeeded": len(steps),
                                     "completed": 1})
    # Events are written for the run's status changes only.
    assert list(RunEvent.objects.filter(run=run).order_by("pk")
                .values_list("status_to", "step_name")) == [
        ("queued", ""), ("running", ""), ("completed", "")]
    call_command("verify_audit")


def test_the_outcome_record_carries_the_intent_and_a_digest_of_the_result(script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    task = step(run, "create-task")
    record = AuditRecord.objects.get(run=run, step_name="create-task", action="succeeded")
    assert record.data["key"] == task.idempotency_key and record.data["attempt"] == 1
    assert record.data["will_do"] == task.intended_action != ""
    assert record.data["remote_ref"] == task.remote_ref != ""
    assert record.data["result_sha256"] == result_digest(task.result)
    began = datetime.fromisoformat(record.data["started_at"])
    assert began == task.attempt_started_at <= record.created_at


def test_each_attempt_of_a_retried_step_has_its_own_record_with_the_same_key(script):
    script.plan["create-task"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    make_due(run)  # the retry is due
    executor.advance_run(run.pk, worker="w2")
    records = list(AuditRecord.objects.filter(run=run, step_name="create-task")
                   .order_by("seq"))
    assert [r.action for r in records] == ["retry_scheduled", "succeeded"]
    assert [r.data["attempt"] for r in records] == [1, 2]
    assert {r.data["key"] for r in records} == {step(run, "create-task").idempotency_key}
    assert records[0].data["started_at"] < records[1].data["started_at"]
    assert "result_sha256" not in records[0].data
    call_command("verify_audit")


def test_a_dead_workers_intent_gets_its_record_from_the_take_back(script):
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="doomed")
    # The intent is in the row, committed; no record is written for it.
    fetch = step(run, "fetch")
    assert (fetch.status, fetch.attempt) == (StepStatus.RUNNING, 1)
    assert not AuditRecord.objects.filter(run=run, step_name="fetch").exists()
    assert lease.work.name == "fetch"
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(days=1))
    (record,) = AuditRecord.objects.filter(run=run, step_name="fetch")
    assert record.action == "step_lease_expired"
    assert record.data["key"] == fetch.idempotency_key and record.data["attempt"] == 1
    assert record.data["started_at"] == fetch.attempt_started_at.isoformat()
    assert record.data["will_do"] == fetch.intended_action
    call_command("verify_audit")


def test_an_undo_in_flight_gets_its_record_from_the_take_back_with_its_own_key(script):
    script.plan["book-shipment"] = [PermanentError("refused")]
    script.plan["charge-card:compensate"] = [TransientError("503")]
    run = new_run("test-saga", order="o-9")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATING
    run.refresh_from_db()
    lease = transitions.claim_run(run.pk, worker="doomed", now=run.next_wake_at)
    assert lease.compensating and lease.work.name == "charge-card"
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(days=1))
    card = step(run, "charge-card")
    records = list(AuditRecord.objects.filter(run=run, step_name="charge-card")
                   .order_by("seq").values_list("action", "data"))
    assert [a for a, _ in records] == ["succeeded", "compensation_retry_scheduled",
                                       "step_lease_expired"]
    taken_back = records[-1][1]
    assert taken_back["key"] == card.compensation_key != card.idempotency_key
    assert taken_back["attempt"] == 2
    assert taken_back["started_at"] == card.attempt_started_at.isoformat()
    # The next worker sends the undo again, with the same key, and records its outcome.
    assert card.status == StepStatus.COMPENSATING and card.lease_owner == ""
    make_due(run)  # the sweep was "now"
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.COMPENSATED
    assert len(script.compensations) == 2
    call_command("verify_audit")


def test_a_credential_in_the_intents_reference_or_description_is_masked_in_its_record(script):
    run = new_run()
    transitions.claim_run(run.pk, worker="doomed")
    # A reference a remote system answered and a line a step's description wrote, each
    # holding a credential (as a row written before descriptions were masked would).
    Step.objects.filter(run=run, name="fetch").update(
        remote_ref="https://bot:hunter2hunter2@tracker.example/T-1",
        intended_action="read the invoice with token=abcd1234efgh")
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(days=1))
    fetch = step(run, "fetch")
    (record,) = AuditRecord.objects.filter(run=run, step_name="fetch")
    assert record.data["remote_ref"] == "https://bot:[redacted]@tracker.example/T-1"
    assert record.data["will_do"] == "read the invoice with token=[redacted]"
    # The runtime's own values are kept as they are.
    assert record.data["key"] == fetch.idempotency_key
    assert record.data["started_at"] == fetch.attempt_started_at.isoformat()
    call_command("verify_audit")


class AnsweredWith(dict):
    """References as a remote system that names the caller's credential in them answers
    them (the script keeps its references with setdefault)."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def setdefault(self, key, ref):
        return super().setdefault(key, self.form.format(ref=ref))


def test_a_credential_in_a_remote_reference_is_in_no_record_of_the_run_and_whole_in_its_row(
        script, monkeypatch):
    # A step and an agent's tool call, each done and then undone by policy: four references
    # answered (two outcomes, two undos), each holding the credential.
    monkeypatch.setattr(script, "effects",
                        AnsweredWith("https://bot:hunter2hunter2@remote.example/{ref}"))
    monkeypatch.setattr(script, "compensations",
                        AnsweredWith("https://remote.example/{ref}?token=hunter2hunter2"))
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    run = start_saga("credential-in-references")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    reserve = step(run, "reserve")
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    # The rows keep what the remote systems answered, whole (the console shows it to those
    # who may see it).
    assert [(row.status, row.remote_ref, row.compensation_ref) for row in (reserve, note)] == [
        (StepStatus.COMPENSATED, "https://bot:hunter2hunter2@remote.example/reserve-1",
         "https://remote.example/undo-reserve?token=hunter2hunter2"),
        (StepStatus.COMPENSATED, "https://bot:hunter2hunter2@remote.example/NOTE-2",
         "https://remote.example/DEL-1?token=hunter2hunter2")]
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    # No record holds the credential anywhere: not in its data, not in its states.
    assert [r.seq for r in records
            if "hunter2" in json.dumps([r.reason, r.before, r.after, r.data])] == []
    # Each outcome's and each undo's record says the reference, masked, in its state after
    # as in its data.
    told = [(r.step_name, r.action, part, state[name]) for r in records
            for part, state in (("before", r.before), ("after", r.after), ("data", r.data))
            for name in ("remote_ref", "compensation_ref") if state.get(name)]
    assert told == [(name, action, part, ref) for name, action, ref in (
        ("reserve", "succeeded", "https://bot:[redacted]@remote.example/reserve-1"),
        ("assist", "tool_call_succeeded", "https://bot:[redacted]@remote.example/NOTE-2"),
        ("assist", "tool_call_compensated", "https://remote.example/DEL-1?token=[redacted]"),
        ("reserve", "compensation_succeeded",
         "https://remote.example/undo-reserve?token=[redacted]"),
    ) for part in ("after", "data")]
    call_command("verify_audit")
