"""The drills of the invoice-triage agent, on PostgreSQL, with real Celery workers
(SIGKILLed at the crash points) calling the sandbox's systems and its model over real HTTP.
Every drill ends by counting the external objects and the model requests, and checking
what must not have happened."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.utils import timezone

from approvals import decisions
from approvals import schedule as approvals_sweep
from approvals.models import ApprovalRequest
from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, Message, ModelCall, Task
from runs.execution import sweeper
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired, TransitionNotAllowed
from runs.models import AgentTurn, AttentionReason, Run, RunStatus, ToolCall
from runs.operator.actions import ACTIONS, ActionInput
from runs.tasks import start_run as start_run_task
from tests.agent_runs import LARGE, SMALL
from tests.processes import kill_hard, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("sandbox_and_broker")]

PERSON = Actor.system("drill-approver")
TOOLS = ["read-invoice", "lookup-vendor", "open-approval-task", "post-ledger"]


def _input(number, notes=""):
    return {"tenant": "tenant-42", "invoice_number": number,
            "requester_email": "requester@example.com", "notes": notes}


def _triage(number=SMALL, notes=""):
    run, _ = transitions.start_run(workflow="invoice-triage",
                                   business_key=f"tenant-42:{number}",
                                   input=_input(number, notes), actor=Actor.system("drill"))
    return run


def _until(run, *statuses, timeout=90):
    return until_status(run, *statuses, timeout=timeout)


def _until_call_waits(run, timeout=90):
    def waiting():
        sweeper.sweep()
        return transitions.waiting_tool_calls(run)

    return wait_for(waiting, timeout=timeout, interval=0.3,
                    what=f"a tool call of run {run.pk} to wait for approval")[0]


def _request_for(call, timeout=30):
    """The approval request the approvals sweep (beat's other job) opens for `call`."""
    def opened():
        approvals_sweep.sweep()
        return ApprovalRequest.objects.filter(tool_call=call, status="pending").first()

    return wait_for(opened, timeout=timeout, interval=0.3,
                    what=f"an approval request for tool call {call.ref}")


def _approver(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get_or_create(name="approvers")[0])
    return user


def _crash(worker, tmp_path, point):
    marker = tmp_path / f"crash-{point.replace('/', '-')}"
    doomed = worker("doomed", RUNS_CRASH_AT=point, RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=60, what=f"the worker to reach {point}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9


def _calls(run):
    return list(ToolCall.objects.filter(step__run=run).order_by("turn", "index"))


def _intents(run, call):
    # Each attempt of the call, from the one record that ended it (the intent is the row).
    return list(AuditRecord.objects.filter(run=run, data__tool_call=call.ref,
                                           data__has_key="started_at"))


def _assert_aftermath(run):
    """What must hold after every agent drill, whatever it did."""
    for call in ToolCall.objects.filter(step__run=run, status="succeeded",
                                        kind__in=["write", "notify"]):
        assert call.remote_ref, f"{call.tool} succeeded without its remote reference"
    assert not ToolCall.objects.filter(step__run=run, status="running").exists()
    # The model was never asked a turn it had already answered.
    assert ModelCall.objects.count() == AgentTurn.objects.filter(step__run=run).count()
    call_command("verify_audit")


def test_agent_drill_crash_after_the_ledger_committed_reconciles_to_one_entry(worker,
                                                                              tmp_path):
    run = _triage()
    _crash(worker, tmp_path, "after_call:triage/post-ledger")
    assert LedgerEntry.objects.count() == 1  # the ledger committed; nobody recorded it
    worker("rescuer")
    run = _until(run, RunStatus.COMPLETED)
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert LedgerEntry.objects.count() == 1 and post.remote_ref == LedgerEntry.objects.get().ref
    assert post.attempt == 1 and len(_intents(run, post)) == 1  # found by key, not resent
    reconciled = AuditRecord.objects.get(run=run, action="reconciled",
                                         data__tool_call=post.ref)
    assert reconciled.data["verdict"] == "found"
    assert Task.objects.count() == 1 and Message.objects.count() == 1
    _assert_aftermath(run)


def test_agent_drill_ended_after_a_crash_settles_the_posting_before_it_ends(worker,
                                                                             tmp_path):
    """The worker dies after the ledger committed; the sweeper takes the run back and a
    person ends it before any worker claims it again. The posting may have happened: the
    take-back made the call unknown, so ending the run needs a second person and leaves it
    waiting until the call is settled; the lookup by key finds the one entry."""
    run = _triage()
    _crash(worker, tmp_path, "after_call:triage/post-ledger")
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=5))
    sweeper.sweep()
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.status == "unknown"  # at the take-back, not at some later claim
    with pytest.raises(SecondPersonRequired):
        transitions.terminate(run.pk, actor=PERSON, reason="invoice withdrawn")
    transitions.terminate(run.pk, actor=PERSON, reason="invoice withdrawn",
                          approved_by=Actor.system("second"))
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert f"triage: tool call {post.ref} post-ledger" in run.status_message
    ACTIONS["reconcile_tool_call"].perform(run.pk, actor=PERSON, given=ActionInput(
        reason="look it up", step="triage", call=post.ref, mode="ask"))
    run.refresh_from_db()
    post.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert post.status == "succeeded" and post.remote_ref == LedgerEntry.objects.get().ref
    assert LedgerEntry.objects.count() == 1 and Task.objects.count() == 1
    assert not ToolCall.objects.filter(step__run=run, status="running").exists()
    call_command("verify_audit")


def test_agent_drill_crash_before_a_call_sends_it_once_with_its_key(worker, tmp_path):
    run = _triage()
    _crash(worker, tmp_path, "before_call:triage/open-approval-task")
    assert Task.objects.count() == 0
    worker("rescuer")
    run = _until(run, RunStatus.COMPLETED)
    task = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    assert Task.objects.count() == 1 and Task.objects.get().idempotency_key == \
        task.idempotency_key
    assert {r.data["key"] for r in _intents(run, task)} == {task.idempotency_key}
    _assert_aftermath(run)


def test_agent_drill_crash_after_a_turn_was_stored_does_not_ask_the_model_again(worker,
                                                                              tmp_path):
    run = _triage()
    _crash(worker, tmp_path, "after_turn:triage")
    assert ModelCall.objects.count() == 1 and AgentTurn.objects.count() == 1
    first = AgentTurn.objects.get()
    worker("rescuer")
    run = _until(run, RunStatus.COMPLETED)
    # Five turns (four with a tool call, then the answer), five requests: the stored first
    # turn was reused, not asked for again.
    assert ModelCall.objects.count() == 5 == AgentTurn.objects.filter(step__run=run).count()
    assert AgentTurn.objects.get(pk=first.pk).tool_calls == first.tool_calls
    assert [c.tool for c in _calls(run)] == TOOLS
    _assert_aftermath(run)


def test_agent_drill_twenty_deliveries_make_one_run_and_each_tool_call_once(worker):
    for _ in range(20):
        start_run_task.apply_async(("invoice-triage", f"tenant-42:{SMALL}", _input(SMALL)))
    worker("a")
    worker("b")
    wait_for(lambda: Run.objects.filter(business_key=f"tenant-42:{SMALL}").exists(),
             timeout=60, what="the run to start")
    run = _until(Run.objects.get(business_key=f"tenant-42:{SMALL}"), RunStatus.COMPLETED)
    assert Run.objects.count() == 1
    made = _calls(run)
    assert [c.tool for c in made] == TOOLS
    assert all(len(_intents(run, c)) == 1 for c in made)
    assert (Task.objects.count(), LedgerEntry.objects.count(), Message.objects.count()) \
        == (1, 1, 1)
    _assert_aftermath(run)


def test_agent_drill_an_approval_never_authorises_arguments_the_model_changed(worker):
    ann, bob = _approver("ann"), _approver("bob")
    run = _triage(LARGE, notes="[sandbox-script: invoice-triage change-args]")
    worker()
    first = _until_call_waits(run)
    assert first.tool == "post-ledger" and LedgerEntry.objects.count() == 0
    # The person decides on the request the approvals app opened, as from the email.
    asked = _request_for(first)
    assert asked.params["args_hash"] == first.args_hash
    assert decisions.decide(asked.pk, user=ann, approved=False, decision_id=uuid.uuid4(),
                            comment="split it").recorded
    second = _until_call_waits(run)
    assert second.arguments["amount"] != first.arguments["amount"]
    again = _request_for(second)
    assert again.pk != asked.pk and again.params["args_hash"] == second.args_hash
    # An approval of the first arguments arriving now (a second approver, an old link):
    # refused, and nothing is posted.
    late = decisions.decide(asked.pk, user=bob, approved=True, decision_id=uuid.uuid4())
    assert late.outcome == "already_decided"
    with pytest.raises(TransitionNotAllowed):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                     args_hash=first.args_hash, approved=True, actor=PERSON)
    with pytest.raises(TransitionNotAllowed, match="never authorises"):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=second.ref,
                                     args_hash=first.args_hash, approved=True, actor=PERSON)
    assert LedgerEntry.objects.count() == 0
    assert decisions.decide(again.pk, user=bob, approved=True,
                            decision_id=uuid.uuid4()).recorded
    run = _until(run, RunStatus.COMPLETED)
    assert LedgerEntry.objects.count() == 1
    assert f"{LedgerEntry.objects.get().amount:.2f}" == second.arguments["amount"]
    _assert_aftermath(run)


def test_agent_drill_a_late_failure_undoes_the_agents_effects_newest_first(worker):
    faults.add("messenger.send", faults.FORBIDDEN)
    run = _triage()
    worker()
    run = _until(run, RunStatus.ATTENTION)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    entry = LedgerEntry.objects.get()
    transitions.compensate(run.pk, actor=PERSON, reason="requester unreachable",
                           approved_by=Actor.system("drill-second-person"))
    run = _until(run, RunStatus.ATTENTION)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert not LedgerEntry.objects.filter(reverses=entry).exists()
    assert Task.objects.get().status != Task.CANCELLED
    transitions.confirm_compensation(run.pk, step_name="triage", actor=PERSON,
                                     reason="reversal checked")
    run = _until(run, RunStatus.COMPENSATED)
    undone = list(AuditRecord.objects.filter(run=run, action="tool_call_compensated")
                  .order_by("seq").values_list("data__tool", flat=True))
    assert undone == ["post-ledger", "open-approval-task"]
    reversal = LedgerEntry.objects.get(reverses=entry)
    task = Task.objects.get()
    assert task.status == Task.CANCELLED and task.cancelled_at > reversal.created_at
    assert LedgerEntry.objects.count() == 2 and Message.objects.count() == 0
    _assert_aftermath(run)
