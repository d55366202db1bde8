"""A high-impact ledger posting times out at a receiver that ignores keys; the automation's
lookup finds nothing and asks a person. The person's "Reconcile: look it up by key" finds
nothing either, seconds later: the request may still be in flight, so "not found" proves
nothing yet. It was recorded as "not done", and the advice that followed was Retry step: a
second posting once the first landed. Now a lookup's "not found" is trusted only after the
step's lookup delay from the first one (the rule the automation already kept for low-impact
effects): before then the step stays unknown, the run says when to look again, Retry is
refused, and a lookup after the request landed settles it with the one entry."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.errors import TransitionNotAllowed, UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.guidance import recommend
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
ASK = ActionInput(reason="look the posting up by its key", step="post-ledger", mode="ask")


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _unknown_posting(script) -> Run:
    script.plan["post-ledger"] = [UnknownOutcome("timed out after sending")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert step(run, "post-ledger").status == StepStatus.UNKNOWN
    return run


def _postings(script) -> list[str]:
    return [key for name, key, _ in script.calls if name == "post-ledger"]


def test_not_found_seconds_after_the_timeout_leaves_the_posting_unknown(script):
    run = _unknown_posting(script)
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)

    run = Run.objects.get(pk=run.pk)
    posting = step(run, "post-ledger")
    assert posting.status == StepStatus.UNKNOWN
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "not found yet" in run.status_message and "look it up again" in run.status_message
    record = AuditRecord.objects.filter(run=run, action="reconciled").latest("seq")
    assert record.data["verdict"] == "undetermined" and record.actor_label == "olga"
    # The time from which "not found" is trusted: the step's lookup delay (10 s) after it.
    assert posting.next_attempt_at == record.created_at + timedelta(seconds=10)

    # Nothing invites a second posting: the advice is to look again later, and Retry step
    # is refused while the posting is unknown.
    advice = recommend(run, _steps(run))
    assert advice.meant == "reconcile" and "again after" in advice.why
    with pytest.raises(TransitionNotAllowed):
        ACTIONS["retry_step"].perform(run.pk, actor=OLGA, given=ActionInput(
            reason="not found: send it", step="post-ledger"))
    assert _postings(script) == [posting.idempotency_key]


def test_the_request_that_landed_meanwhile_is_found_and_posted_once(script):
    run = _unknown_posting(script)
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)
    key = step(run, "post-ledger").idempotency_key
    script.effects[key] = "LE-late"  # the slow request lands

    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)
    assert step(run, "post-ledger").status == StepStatus.SUCCEEDED
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "post-ledger").remote_ref == "LE-late"
    assert _postings(script) == [key]


def test_not_found_after_the_delay_is_trusted_and_retry_sends_it_with_the_same_key(script):
    run = _unknown_posting(script)
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)
    # The lookup delay passes with nothing landed (the first "not found" was 11 s ago).
    Step.objects.filter(run=run, name="post-ledger").update(
        next_attempt_at=timezone.now() - timedelta(seconds=1))

    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)
    run = Run.objects.get(pk=run.pk)
    assert step(run, "post-ledger").status == StepStatus.FAILED
    advice = recommend(run, _steps(run))
    assert (advice.action.name, advice.step) == ("retry_step", "post-ledger")
    advice.action.perform(run.pk, actor=OLGA,
                          given=ActionInput(reason="not found: send it", step="post-ledger"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    key = step(run, "post-ledger").idempotency_key
    assert _postings(script) == [key, key]


def test_a_person_who_records_not_done_by_hand_answers_for_it_with_their_evidence(script):
    # Recorded by hand, "not found" is the person's finding, with their evidence: taken as
    # they give it (the lookup's rule is about what a lookup alone can prove).
    run = _unknown_posting(script)
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="checked with finance", step="post-ledger", mode="not_found",
        evidence="finance confirmed no posting under the key and blocked it"))
    assert step(run, "post-ledger").status == StepStatus.FAILED


def test_a_tool_calls_lookup_follows_the_same_rule(script, monkeypatch):
    from runs.agent_models import ToolCall
    from runs.agents import agent_loop
    from runs.definitions import definition
    from runs.machine import transitions
    from runs.machine.errors import Classified
    from runs.machine.transitions.agent_calls import ModelTurn
    from runs.models import ErrorClass
    from runs.operator.reconciliation import reconcile_tool_call_by_key
    from tests.workflows import write_note

    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": '{"text": "a"}'}])]
    sent = []

    def timed_out(tool, ctx, args):
        sent.append(ctx.key)
        return transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.UNKNOWN, "timed out after sending"))

    monkeypatch.setattr(agent_loop, "ask_model", lambda *a, **k: turns.pop(0) if turns
                        else ModelTurn(content="done", tool_calls=[]))
    monkeypatch.setattr(agent_loop, "call_tool", timed_out)
    # A note at a receiver that ignores keys, whose lookup cannot tell at first (a person
    # is asked), then finds nothing.
    answers = [definition.Undetermined("the notes service is reindexing")]
    monkeypatch.setattr(write_note, "honours_key", False)
    monkeypatch.setattr(write_note, "reconcile_fn", lambda ctx, args: answers.pop(0) if answers
                        else definition.NotFound())
    run, _ = transitions.start_run(workflow="test-agent", business_key="slow-note",
                                   input={"order": "o-1"}, actor=OLGA, wake=False)
    executor.advance_run(run.pk, worker="w1")
    call = ToolCall.objects.get(step__run_id=run.pk)
    assert call.status == "unknown", Run.objects.get(pk=run.pk).status_message

    reconcile_tool_call_by_key(run.pk, step_name="assist", call_ref=call.ref, actor=OLGA,
                               reason="look the note up")
    call.refresh_from_db()
    run = Run.objects.get(pk=run.pk)
    assert call.status == "unknown" and not call.key_open_for_repeat
    assert call.next_attempt_at is not None and "not found yet" in run.status_message
    assert run.status == RunStatus.ATTENTION and sent == [call.idempotency_key]
    advice = recommend(run, _steps(run))
    assert advice.action.name == "reconcile_tool_call" and "again after" in advice.why
