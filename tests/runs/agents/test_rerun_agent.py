"""Re-run from a chosen step over an agent step: the agent starts a fresh conversation as a
new generation (the model is asked anew), each tool call it makes gets a key of that
generation, the earlier generation's turns and calls stay stored as its history, and the
calls whose effect stands are named first and weighed for four eyes as steps' effects are.
Against the sandbox over real HTTP: the requests it receives are counted."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.signals import request_started

from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.machine import crashpoints, keys, transitions
from runs.machine.errors import SecondPersonRequired, TransitionNotAllowed
from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from runs.operator.actions import ACTIONS
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)

SECOND = Actor.system("second")


@pytest.fixture(autouse=True)
def sandbox(live_sandbox, settings):
    # The model's requests are counted: none may time out on a busy machine and be asked
    # again (no test here injects a timeout).
    settings.EXTERNAL_TIMEOUT_SECONDS = 10
    return live_sandbox


@pytest.fixture
def received():
    """Each request the sandbox receives while the test runs: (path, Idempotency-Key)."""
    seen = []

    def note(sender, environ, **kwargs):
        seen.append((environ.get("PATH_INFO", ""), environ.get("HTTP_IDEMPOTENCY_KEY", "")))

    request_started.connect(note, weak=False)
    yield seen
    request_started.disconnect(note)


def _keyed(received, path_part):
    """The Idempotency-Key header of each request to `path_part` ("" where none was sent:
    the ledger takes its key, the transaction reference, in the body)."""
    return [key for path, key in received if path_part in path]


def _calls(run, generation):
    return list(ToolCall.objects.filter(step__run=run, generation=generation)
                .order_by("turn", "index"))


def _explain(run):
    run = Run.objects.get(pk=run.pk)
    return ACTIONS["rerun_from_step"].explain(run, list(run.steps.order_by("position")))


def test_a_rerun_from_the_agent_step_sends_each_call_once_more_with_a_new_key(received):
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    old = _calls(run, 0)
    task_call, post_call = old[2], old[3]
    assert (task_call.tool, post_call.tool) == ("open-approval-task", "post-ledger")
    assert ModelCall.objects.count() == 5 and AgentTurn.objects.filter(step__run=run).count() == 5

    # The dialog names the calls whose effect stands, with their state, before anyone agrees;
    # the posting is high impact: a second person must approve.
    lines = _explain(run)
    assert (f"triage: tool call 2.0 open-approval-task: succeeded (low impact, key "
            f"{task_call.idempotency_key[:12]}..., ref {task_call.remote_ref})") in lines
    assert any(line.startswith("triage: tool call 3.0 post-ledger: succeeded (high impact")
               for line in lines)
    assert not any("read-invoice" in line for line in lines)  # a read changed nothing
    assert any("second person must approve" in line for line in lines)
    with pytest.raises(SecondPersonRequired, match="tool call 3.0 post-ledger"):
        transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR,
                                    reason="the vendor's IBAN changed")
    assert Run.objects.get(pk=run.pk).generation == 0

    transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR,
                                reason="the vendor's IBAN changed", approved_by=SECOND)
    triage = Step.objects.get(run=run, name="triage")
    assert triage.generation == 1 and triage.status == "pending"
    received.clear()
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message

    new = _calls(run, 1)
    assert [c.tool for c in new] == [c.tool for c in old]
    assert new[3].idempotency_key == keys.tool_call_key(
        "invoice-triage", run.business_key, "triage", 1, 3, 0, "post-ledger", 1)
    # At the receiver: each write exactly once more, under its new key; no old key resent.
    assert _keyed(received, "/tracker/tasks") == [new[2].idempotency_key]
    assert len(_keyed(received, "/ledger/entries")) == 1
    old_keys = {c.idempotency_key for c in old}
    assert not old_keys & {key for _, key in received}
    # The one posting made an entry of its own, under the new key; the old one stands.
    assert Task.objects.count() == 2 and LedgerEntry.objects.count() == 2
    assert LedgerEntry.objects.get(transaction_ref=new[3].idempotency_key).ref == \
        new[3].remote_ref
    assert LedgerEntry.objects.get(transaction_ref=post_call.idempotency_key).ref == \
        post_call.remote_ref

    # The earlier generation is kept as it ended; the new one is separate and fresh.
    assert [(c.pk, c.status, c.idempotency_key) for c in _calls(run, 0)] == \
        [(c.pk, "succeeded", c.idempotency_key) for c in old]
    assert AgentTurn.objects.filter(step__run=run, generation=0).count() == 5
    assert list(AgentTurn.objects.filter(step__run=run, generation=1)
                .order_by("index").values_list("index", flat=True)) == [0, 1, 2, 3, 4]
    assert ModelCall.objects.count() == 10  # the new conversation asked the model anew
    result = Step.objects.get(run=run, name="triage").result
    assert result["turns"] == 5 and result["tool_calls"] == 4

    record = AuditRecord.objects.get(run=run, action="rerun_from_step")
    assert record.data["approved_by"] == "second"
    assert f"triage: tool call 3.0 post-ledger: succeeded (high impact, key " \
           f"{post_call.idempotency_key[:12]}..., ref {post_call.remote_ref})" \
        in record.data["standing"]
    (previous,) = [p for p in record.data["previous_steps"] if p["step"] == "triage"]
    assert previous["turns"] == 5 and previous["tool_calls"] == 4


def test_within_the_new_generation_its_own_stored_turns_are_reused(received):
    run = advance(start_triage())
    transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR, reason="again",
                                approved_by=SECOND)
    with crashpoints.failing("triage/post-ledger"):
        run = advance(run)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert ModelCall.objects.count() == 5 + 4
    # "3.0" names the call of the current generation, not the one generation 0 made.
    failed = ToolCall.objects.get(step__run=run, generation=1, turn=3, index=0)
    assert failed.status == "failed"
    transitions.retry_tool_call(run.pk, step_name="triage", call_ref="3.0", actor=ACTOR,
                                reason="ledger back")
    received.clear()
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    # Only the final answer was asked for: the new generation's four turns were reused.
    assert ModelCall.objects.count() == 5 + 4 + 1
    assert len(_keyed(received, "/ledger/entries")) == 1
    assert LedgerEntry.objects.filter(transaction_ref=failed.idempotency_key).count() == 1
    assert ToolCall.objects.get(step__run=run, generation=0, turn=3).attempt == 1


def test_the_run_page_shows_each_generation_of_the_conversation(client):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    client.force_login(olga)
    run = advance(start_triage())
    transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR, reason="again",
                                approved_by=SECOND)
    run = advance(run)
    old_task = ToolCall.objects.get(step__run=run, generation=0, tool="open-approval-task")
    refused = transitions.call_refusal(
        "compensate_tool_call", Run.objects.get(pk=run.pk), old_task.step, old_task, None,
        last_turn=0)
    assert "generation 0, which a re-run replaced" in refused

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="agent-triage"' in page and "Agent triage, generation 1 (current)" in page
    assert 'id="agent-triage-g0"' in page and "generation 0 (history" in page
    assert "5 turns and 4 tool calls kept" in page
    # Both generations' calls are listed with their keys.
    for call in ToolCall.objects.filter(step__run=run):
        assert call.idempotency_key in page


def test_a_call_that_never_ran_is_cancelled_and_its_approval_authorises_nothing_new():
    run = advance(start_triage(LARGE))
    (waiting,) = transitions.waiting_tool_calls(run)
    transitions.terminate(run.pk, actor=ACTOR, reason="wrong vendor data")
    # Nothing high-impact stands (the posting waited): no second person is needed.
    transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR,
                                reason="vendor data fixed")
    old = ToolCall.objects.get(pk=waiting.pk)
    assert old.status == "cancelled" and "never ran" in old.error_message
    record = AuditRecord.objects.get(run=run, action="rerun_from_step")
    (previous,) = [p for p in record.data["previous_steps"] if p["step"] == "triage"]
    assert previous["cancelled_calls"] == [waiting.ref]

    run = advance(run)
    assert run.status == RunStatus.WAITING, run.status_message
    (again,) = transitions.waiting_tool_calls(run)
    assert again.generation == 1 and again.ref == waiting.ref
    assert again.args_hash == waiting.args_hash and again.pk != waiting.pk
    # A decision on the earlier generation's request does not authorise the new call, even
    # with the same arguments.
    with pytest.raises(TransitionNotAllowed, match="earlier generation"):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=waiting.ref,
                                     args_hash=waiting.args_hash, approved=True, actor=ACTOR,
                                     call_id=waiting.pk)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=again.ref,
                                 args_hash=again.args_hash, approved=True, actor=ACTOR,
                                 call_id=again.pk)
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert list(LedgerEntry.objects.values_list("transaction_ref", flat=True)) == [
        again.idempotency_key]


def test_a_call_whose_outcome_is_unknown_is_settled_first(monkeypatch):
    from demo.agent_workflow import triage
    from runs.definitions.definition import Found

    tool = triage.tools["post-ledger"]
    post = tool.fn

    def terminate_then_post(ctx, args):
        # With a second person's approval: the posting in flight may stand (four eyes).
        transitions.terminate(ctx.run_id, actor=ACTOR, reason="stop this triage",
                              approved_by=SECOND)
        return post(ctx, args)

    monkeypatch.setattr(tool, "fn", terminate_then_post)
    run = advance(start_triage())
    assert run.attention_reason == "ended_unsettled"
    unknown = ToolCall.objects.get(step__run=run, tool="post-ledger", status="unknown")
    with pytest.raises(TransitionNotAllowed, match="post-ledger: outcome unknown"):
        transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR, reason="again",
                                    approved_by=SECOND)
    entry = LedgerEntry.objects.get(transaction_ref=unknown.idempotency_key)
    transitions.reconcile_tool_call(run.pk, step_name="triage", call_ref=unknown.ref,
                                    verdict=Found(entry.ref), actor=ACTOR,
                                    reason="found at the ledger", evidence="ledger by key")
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    # Settled, it stands: named in the dialog, and the re-run needs a second person.
    assert any(line.startswith("triage: tool call 3.0 post-ledger: succeeded (high impact")
               for line in _explain(run))
    with pytest.raises(SecondPersonRequired):
        transitions.rerun_from_step(run.pk, step_name="triage", actor=ACTOR, reason="again")
