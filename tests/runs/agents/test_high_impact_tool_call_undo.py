"""The pause before a high-impact undo is one rule for steps and agent tool calls
(runs.machine.transitions.compensation.pauses_before_undo): a compensation stops before
undoing a tool call whose tool is high impact, with nothing sent, until a person confirms
that call's undo (confirm_compensation, the step's action, naming the call); then the undo
is sent once with its compensation key and the older undos follow. A low-impact call's
undo does not stop, and a step's pause is unchanged. The invoice-triage agent runs against
the sandbox over real HTTP; each test counts what the receiver holds afterwards."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, Task
from runs.definitions.definition import registry
from runs.machine import crashpoints, transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.keys import tool_call_key, tool_compensation_key
from runs.machine.transitions.agent_calls import args_hash
from runs.models import AttentionReason, Run, RunStatus, Step, ToolCall, ToolCallStatus
from runs.operator.action_input import ActionInputError
from runs.operator.actions import ACTIONS, ActionInput
from runs.reads.agent_selectors import conversations
from tests.agent_runs import ACTOR, advance, start_triage
from tests.factories import SYSTEM, new_run, place, step

SECOND = Actor.system("second")


def reversals() -> int:
    return LedgerEntry.objects.filter(reverses__isnull=False).count()


def steps_of(run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def paused_records(run):
    return AuditRecord.objects.filter(run=run, action="compensation_paused")


def paused_at_the_posting(key: str):
    """A triage run whose agent posted to the ledger (high impact) and opened a task (low),
    then failed late; compensated (a second person agreeing) and advanced: it pauses."""
    run = start_triage(key=f"tenant-42:{key}")
    with crashpoints.failing("tell-requester"):
        run = advance(run)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable",
                           approved_by=SECOND)
    return advance(run)


def confirm(run, **given):
    return ACTIONS["confirm_compensation"].perform(
        run.pk, actor=ACTOR, given=ActionInput(reason="reversal checked", step="triage",
                                               **given))


@pytest.mark.django_db(transaction=True)
def test_a_high_impact_tool_calls_undo_waits_for_a_person_then_is_sent_once(live_sandbox):
    run = paused_at_the_posting("undo-pause")
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    # Paused before the newest undo, the posting's: nothing was sent, not even the older
    # low-impact undo behind it.
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.COMPENSATION_PAUSED)
    assert f"triage: tool post-ledger (call {post.ref})" in run.status_message
    assert reversals() == 0 and Task.objects.get().status != Task.CANCELLED
    assert (post.status, post.compensation_attempt) == (ToolCallStatus.SUCCEEDED, 0)
    assert (task_call.status, task_call.compensation_attempt) == (ToolCallStatus.SUCCEEDED, 0)
    (record,) = paused_records(run)
    assert record.step_name == "triage"
    assert (record.data["tool_call"], record.data["tool"]) == (post.ref, "post-ledger")
    assert record.data["waiting"] == [f"triage: tool post-ledger (call {post.ref})",
                                      f"triage: tool open-approval-task (call {task_call.ref})"]
    # The one action offers it on that call (console and API read these ops), and names it.
    assert ACTIONS["confirm_compensation"].refusal(run, steps_of(run)) is None
    ops = {c["ref"]: c["ops"] for t in conversations(run, steps_of(run))[0].turns
           for c in t.calls}
    assert [ref for ref, names in ops.items() if "confirm_compensation" in names] == [post.ref]
    explained = " ".join(ACTIONS["confirm_compensation"].explain(run, steps_of(run)))
    assert f"triage: tool post-ledger (call {post.ref})" in explained
    assert post.compensation_key in explained and "[redacted]" in explained

    # A wake-up meanwhile changes nothing: nobody holds the run, nothing is sent.
    assert advance(run).status == RunStatus.ATTENTION and reversals() == 0
    # Only the paused call's undo can be confirmed, and only with a reason.
    with pytest.raises(TransitionNotAllowed, match=rf"paused at the undo of triage: tool "
                                                   rf"post-ledger \(call {post.ref}\)"):
        confirm(run, call=task_call.ref)
    # A call the run does not have is named as such first (operator_rules.named_target).
    with pytest.raises(TransitionNotAllowed, match=r"has no tool call '9\.9' in step 'triage'"):
        confirm(run, call="9.9")
    # Not written as a call's id at all: input to correct, before the run's state.
    with pytest.raises(ActionInputError, match=r"the call is TURN\.INDEX"):
        confirm(run, call="abc")
    with pytest.raises(TransitionNotAllowed, match="reason"):
        ACTIONS["confirm_compensation"].perform(
            run.pk, actor=ACTOR, given=ActionInput(reason=" ", step="triage", call=post.ref))
    assert paused_records(run).count() == 1 and reversals() == 0

    assert confirm(run, call=post.ref).status == RunStatus.COMPENSATING
    post.refresh_from_db()
    assert post.status == ToolCallStatus.COMPENSATING and post.compensation_attempt == 0
    confirmed = AuditRecord.objects.get(run=run, action="compensation_confirmed")
    assert (confirmed.data["tool_call"], confirmed.data["key"]) == (post.ref,
                                                                    post.compensation_key)
    assert confirmed.reason == "reversal checked"

    run = advance(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    # Exactly one reversal, sent with the call's compensation key; then the older undo.
    (reversal,) = LedgerEntry.objects.filter(reverses__isnull=False)
    post.refresh_from_db()
    assert reversal.transaction_ref == post.compensation_key
    assert (post.status, post.compensation_attempt) == (ToolCallStatus.COMPENSATED, 1)
    task = Task.objects.get()
    assert task.status == Task.CANCELLED and task.cancelled_at > reversal.created_at
    undone = list(AuditRecord.objects.filter(run=run, action="tool_call_compensated")
                  .order_by("seq").values_list("data__tool", flat=True))
    assert undone == ["post-ledger", "open-approval-task"]
    # The low-impact undo behind it did not pause: one pause in all.
    assert paused_records(run).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_confirmed_undo_cut_short_by_a_crash_is_sent_again_without_a_second_pause(
        live_sandbox, monkeypatch):
    run = paused_at_the_posting("undo-crash")
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    confirm(run)  # the step named alone: the undo it is paused at, the posting's
    post.refresh_from_db()
    assert post.status == ToolCallStatus.COMPENSATING

    class WorkerDied(BaseException):
        pass

    real_reach = crashpoints.reach

    def dies_before_the_undo(where, point):
        if (where, point) == (crashpoints.BEFORE_CALL, "triage/post-ledger:compensate"):
            raise WorkerDied(point)
        real_reach(where, point)

    # The worker dies once the undo's intent is committed, before it sends anything.
    monkeypatch.setattr(crashpoints, "reach", dies_before_the_undo)
    with pytest.raises(WorkerDied):
        advance(run)
    monkeypatch.setattr(crashpoints, "reach", real_reach)
    post.refresh_from_db()
    assert (post.status, post.compensation_attempt) == (ToolCallStatus.COMPENSATING, 1)
    assert reversals() == 0
    # The sweeper takes the run back once the lease ran out; the next worker sends the
    # confirmed undo with the same key and asks nobody again.
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5))
    assert transitions.expire_lease(run.pk)
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    post.refresh_from_db()
    assert (post.status, post.compensation_attempt) == (ToolCallStatus.COMPENSATED, 2)
    (reversal,) = LedgerEntry.objects.filter(reverses__isnull=False)
    assert reversal.transaction_ref == post.compensation_key
    assert paused_records(run).count() == 1


@pytest.mark.django_db
def test_a_low_impact_tool_calls_undo_does_not_pause(script):
    run = place(new_run("test-agent"), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                step_statuses={"assist": "succeeded"})
    key = tool_call_key(run.workflow_name, run.business_key, "assist", 1, 1, 0, "write-note")
    note = ToolCall.objects.create(
        step=step(run, "assist"), turn=1, index=0, call_id="c1", tool="write-note",
        kind="write", impact="low", arguments={"text": "hi"}, args_hash=args_hash({"text": "hi"}),
        status=ToolCallStatus.SUCCEEDED, idempotency_key=key,
        compensation_key=tool_compensation_key(key), attempt=1, remote_ref="NOTE-1",
        started_at=timezone.now(), finished_at=timezone.now(), updated_at=timezone.now())
    transitions.compensate(run.pk, actor=SYSTEM, reason="notes withdrawn")
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert [(name, key) for name, key, _ in script.calls] == [
        ("write-note:compensate", note.compensation_key)]
    assert not paused_records(run).exists()
    note.refresh_from_db()
    assert note.status == ToolCallStatus.COMPENSATED


@pytest.mark.django_db
def test_a_high_impact_step_still_pauses_and_is_confirmed_without_a_call(script):
    run = place(new_run(), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                step_statuses={"fetch": "succeeded", "classify": "succeeded",
                               "create-task": "succeeded", "post-ledger": "succeeded"})
    transitions.compensate(run.pk, actor=SYSTEM, reason="invoice withdrawn",
                           approved_by=SECOND)
    run = advance(run)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert "before undoing post-ledger (high impact)" in run.status_message
    assert script.compensations == {}
    (record,) = paused_records(run)
    assert record.step_name == "post-ledger"
    assert record.data["waiting"] == ["post-ledger", "create-task"]
    # A step's pause names no tool call: confirming one is refused, nothing written.
    with pytest.raises(TransitionNotAllowed, match="has no tool call '0.0' in step 'post-ledger'"):
        transitions.confirm_compensation(run.pk, step_name="post-ledger", call_ref="0.0",
                                         actor=SYSTEM, reason="checked")
    transitions.confirm_compensation(run.pk, step_name="post-ledger", actor=SYSTEM,
                                     reason="checked")
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert list(AuditRecord.objects.filter(run=run, action="compensation_succeeded")
                .order_by("seq").values_list("step_name", flat=True)) == \
        ["post-ledger", "create-task"]
    assert paused_records(run).count() == 1



@pytest.mark.django_db(transaction=True)
def test_a_compensation_whose_tool_a_release_removed_undoes_nothing_and_waits(
        live_sandbox, monkeypatch):
    """A call whose effect stands is never passed over as if it had no undo: a release that
    removed its tool leaves the compensation failed, naming the call, with nothing undone
    (not even the older undos); with the tool back, compensating again goes on."""
    run = start_triage(key="tenant-42:undo-undeclared")
    with crashpoints.failing("tell-requester"):
        run = advance(run)
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.status == ToolCallStatus.SUCCEEDED
    agent = registry.get("invoice-triage", run.workflow_version).step("triage")
    monkeypatch.delitem(agent.tools, "post-ledger")
    transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable",
                           approved_by=SECOND)
    run = advance(run)

    assert run.status == RunStatus.COMPENSATION_FAILED
    assert run.status_message == (f"triage tool call {post.ref}: invoice-triage v1 in this "
                                  f"worker declares no tool 'post-ledger'")
    assert reversals() == 0 and Task.objects.get().status != Task.CANCELLED
    assert AuditRecord.objects.filter(run=run, action="definition_missing").count() == 1

    monkeypatch.undo()
    transitions.compensate(run.pk, actor=ACTOR, reason="tool restored", approved_by=SECOND)
    run = advance(run)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.COMPENSATION_PAUSED)
    assert f"triage: tool post-ledger (call {post.ref})" in run.status_message


@pytest.mark.django_db(transaction=True)
def test_a_tools_undo_a_release_removed_stops_the_compensation_at_its_call(
        live_sandbox, monkeypatch):
    """The tool stays, its undo goes: the posting's effect stands, so the compensation
    stops there, naming the call, with nothing undone; it never ends "compensated"."""
    run = start_triage(key="tenant-42:undo-removed")
    with crashpoints.failing("tell-requester"):
        run = advance(run)
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    tool = registry.get("invoice-triage", run.workflow_version).step("triage").tools[
        "post-ledger"]
    monkeypatch.setattr(tool, "compensate_fn", None)
    transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable",
                           approved_by=SECOND)
    run = advance(run)

    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message == (f"triage tool call {post.ref}: invoice-triage v1 in this "
                                  "worker declares no undo for tool 'post-ledger', whose "
                                  "effect stands")
    assert reversals() == 0 and Task.objects.get().status != Task.CANCELLED
    post.refresh_from_db()
    assert post.status == ToolCallStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_a_paused_undo_a_release_removed_is_still_the_one_confirmed_and_then_held(
        live_sandbox, monkeypatch):
    run = paused_at_the_posting("paused-undo-removed")
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    tool = registry.get("invoice-triage", run.workflow_version).step("triage").tools[
        "post-ledger"]
    monkeypatch.setattr(tool, "compensate_fn", None)
    # The pause still names the posting: confirming it is what is offered, never a
    # "compensate" that would pass over it.
    assert ACTIONS["confirm_compensation"].refusal(run, steps_of(run)) is None
    confirm(run, call=post.ref)
    run = advance(run)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    assert f"tool call {post.ref}" in run.status_message
    assert reversals() == 0 and Task.objects.get().status != Task.CANCELLED
