"""A person's decision on what a run waits for (an approval step, an agent's tool call)
that reaches the run after it stopped waiting (rejected meanwhile, terminated) is refused in
the words an operator's refused action is told in: the run, its workflow and business key,
and its state in words, never the transition's internal name ("decide_approval is not
allowed for run 12 ... in state terminated"). The approvals app records the words on the
request, where the approver reads why their decision was not applied."""

import re

import pytest

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import Run
from tests.agent_runs import ACTOR, LARGE, advance, start_triage
from tests.factories import SYSTEM, new_run


@pytest.mark.django_db
def test_an_approval_decided_after_the_run_was_rejected_names_the_run_and_its_state(script):
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    transitions.decide_approval(run.pk, step_name="approve", approved=False, actor=SYSTEM,
                                comment="wrong vendor")
    records = AuditRecord.objects.filter(run=run).count()

    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.decide_approval(run.pk, step_name="approve", approved=True, actor=SYSTEM)

    assert str(refused.value) == (
        f"the decision cannot be applied to run {run.pk} (test-approval {run.business_key}): "
        "it is waiting for a person (attention: approval rejected)")
    assert AuditRecord.objects.filter(run=run).count() == records


@pytest.mark.django_db(transaction=True)
def test_a_tool_call_decided_after_the_run_was_terminated_names_the_run_and_its_state(
        live_sandbox):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    transitions.terminate(run.pk, actor=ACTOR, reason="invoice withdrawn")

    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                     args_hash=call.args_hash, approved=True, actor=ACTOR)

    assert re.fullmatch(rf"the decision cannot be applied to run {run.pk} \(invoice-triage "
                        r".*\): it was terminated \(terminated\)", str(refused.value)), \
        str(refused.value)
    assert "decide_approval" not in str(refused.value)
    assert Run.objects.get(pk=run.pk).status == "terminated"


@pytest.mark.django_db(transaction=True)
def test_a_decision_on_a_cancelled_call_names_the_calls_state_not_the_runs(live_sandbox):
    """The call's own state is told first, as an operator action aimed at one tells it
    (tool_call_rules.call_state_refusal): its run, queued because the call it waited on
    was cancelled, says nothing of why this decision stands on nothing."""
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    transitions.cancel_tool_call(run.pk, step_name="triage", call_ref=call.ref, actor=ACTOR,
                                 reason="wrong cost centre")
    assert Run.objects.get(pk=run.pk).status == "queued"
    records = AuditRecord.objects.filter(run=run).count()

    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                     args_hash=call.args_hash, approved=True, actor=ACTOR,
                                     call_id=call.pk)

    assert str(refused.value) == (
        f"tool call {call.ref} (post-ledger) of triage no longer waits for approval: a "
        "person cancelled it: it was never made (cancelled); this decision is for a request "
        "that no longer stands")
    assert AuditRecord.objects.filter(run=run).count() == records
