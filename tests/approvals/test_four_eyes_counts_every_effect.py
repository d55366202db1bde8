"""Four eyes counts every high-impact effect that stands or may stand: a step whose outcome is
unknown (it may have paid), one in flight (a run ended under it leaves it unknown, and it may
land: one operator alone ended such a run), and an agent's tool call that succeeded or is in
flight, whatever state its agent step is in. The second person's page lists each effect with
its state."""

import uuid

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import four_eyes
from audit.chain import Actor
from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired
from runs.models import Run, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage
from tests.factories import new_run, place

OPERATOR = Actor.system("olga")
SECOND = Actor.system("sam")


def _ended(run) -> bool:
    return AuditRecord.objects.filter(run=run, action__in=["terminated", "cancelled"]).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["terminate", "cancel"])
def test_an_unknown_high_impact_payment_needs_a_second_person(action):
    run = place(new_run(), status=RunStatus.ATTENTION, attention_reason="unknown_outcome",
                step_statuses={"fetch": "succeeded", "classify": "succeeded",
                               "create-task": "succeeded", "post-ledger": "unknown"})
    call = getattr(transitions, action)
    with pytest.raises(SecondPersonRequired, match="post-ledger: outcome unknown"):
        call(run.pk, actor=OPERATOR, reason="stop it")
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION and not _ended(run)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["terminate", "cancel"])
def test_a_high_impact_payment_in_flight_needs_a_second_person(action):
    run = place(new_run(), status=RunStatus.RUNNING,
                step_statuses={"fetch": "succeeded", "classify": "succeeded",
                               "create-task": "succeeded", "post-ledger": "running"})
    with pytest.raises(SecondPersonRequired, match="post-ledger: in flight"):
        getattr(transitions, action)(run.pk, actor=OPERATOR, reason="stop it")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.RUNNING and not run.cancel_requested and not _ended(run)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["terminate", "cancel"])
def test_an_agents_high_impact_tool_call_in_flight_needs_a_second_person(action):
    run = place(new_run("test-agent"), status=RunStatus.RUNNING,
                step_statuses={"assist": "running"})
    ToolCall.objects.create(
        step=Step.objects.get(run=run, name="assist"), turn=1, index=0, call_id="c0",
        tool="write-note", impact="high", status="running", args_hash="h",
        idempotency_key=uuid.uuid4().hex, updated_at=timezone.now(), arguments={})
    with pytest.raises(SecondPersonRequired, match="tool call 1.0 write-note: in flight"):
        getattr(transitions, action)(run.pk, actor=OPERATOR, reason="stop it")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.RUNNING and not run.cancel_requested and not _ended(run)


@pytest.mark.django_db
def test_the_second_persons_page_lists_each_effect_with_its_state(client):
    run = place(new_run(), status=RunStatus.ATTENTION, attention_reason="unknown_outcome",
                step_statuses={"fetch": "succeeded", "classify": "succeeded",
                               "create-task": "succeeded", "post-ledger": "unknown"})
    olga = User.objects.create_user("olga")
    request, created = four_eyes.request_operator_action(
        run, action="terminate", requested_by=olga, reason="vendor fraud", approvers=["sam"])
    assert created
    assert request.snapshot["high_impact_effects"] == [
        "post-ledger: outcome unknown: may have happened"]
    sam = User.objects.create_superuser("sam", password="pw")
    client.force_login(sam)
    page = client.get(f"/approvals/{request.pk}/").content.decode()
    assert "post-ledger: outcome unknown: may have happened" in page


@pytest.mark.django_db(transaction=True)
def test_an_agents_standing_ledger_posting_needs_a_second_person_after_the_agent_failed(
        live_sandbox, monkeypatch):
    tool = triage.tools["post-ledger"]
    post = tool.fn

    def post_then_the_model_refuses(ctx, args):
        result = post(ctx, args)
        # Every later model turn is refused for good: the agent step fails after posting.
        faults.add("model.chat", faults.FORBIDDEN, times=50)
        return result

    monkeypatch.setattr(tool, "fn", post_then_the_model_refuses)
    run = advance(start_triage())
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert Step.objects.get(run=run, name="triage").status != "succeeded"
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert posting.status == "succeeded" and LedgerEntry.objects.count() == 1

    for action in ("terminate", "cancel"):
        with pytest.raises(SecondPersonRequired, match="post-ledger: succeeded"):
            getattr(transitions, action)(run.pk, actor=OPERATOR, reason="stop it")
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION and not _ended(run)
    transitions.terminate(run.pk, actor=OPERATOR, reason="stop it", approved_by=SECOND)
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert LedgerEntry.objects.count() == 1
