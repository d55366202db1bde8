"""A value sealed with a key that FIELD_ENCRYPTION_KEYS no longer holds holds its run for a
person with a reason of its own (sealed_value_unreadable), whose next step says to put the
key back. Opened by the runtime before the effect (a tool call's arguments before the call,
an agent's conversation before the model is asked), nothing was sent: the effect failed, and
a retry with the key back sends it once. Opened by the code of a write (an earlier step's
result it reads), it may have sent before it read: unknown, looked up by its key once the
key is back, and sent once if not found. An undo that cannot open it stands as any failed
undo, sent again with its own key. Before, the agent's worker crashed on the call's
arguments (the run taken back again and again), and a step's effect or a model turn was
called unknown or unexpected, to be fixed in the code."""

import pytest
from cryptography.fernet import Fernet

from audit.chain import Actor
from demo.sandbox.models import LedgerEntry, ModelCall
from runs.agent_models import ToolCall
from runs.definitions import definition
from runs.definitions.definition import Found, NotFound, StepResult, Workflow
from runs.execution import executor
from runs.machine import sensitive, transitions
from runs.machine.errors import PermanentError, TransitionNotAllowed
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ActionInput
from runs.operator.guidance import recommend
from tests.agent_runs import ACTOR, LARGE, advance, start_triage
from tests.workflows import FAST, OrderIn, script, scripted_call

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()
IBAN = "DE89370400440532013000"


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _held_for_the_key(run: Run):
    """The run is held for a person for the sealed value, and its next step says why."""
    assert run.status == RunStatus.ATTENTION, (run.status, run.status_message)
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message and "FIELD_ENCRYPTION_KEYS" in run.status_message
    assert "may have" not in run.status_message
    advice = recommend(run, _steps(run))
    assert advice.reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert advice.reason_label == "a sealed value cannot be opened"
    assert "'old'" in advice.happened
    assert "FIELD_ENCRYPTION_KEYS" in advice.why and "nothing was sent" in advice.why
    assert "reseal_fields" in advice.why
    assert "unexpected error" not in advice.why and "fix the code" not in advice.why
    return advice


@pytest.mark.django_db(transaction=True)
def test_an_approved_tool_call_whose_argument_cannot_be_opened_is_not_made(live_sandbox,
                                                                            settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    assert sensitive.is_sealed(call.arguments["iban"])
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True, actor=ACTOR)
    entries = LedgerEntry.objects.count()

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    run = advance(run)

    advice = _held_for_the_key(run)
    call.refresh_from_db()
    assert call.status == StepStatus.FAILED  # not unknown: nothing was sent
    assert call.error_class == ErrorClass.UNREADABLE
    assert call.attempt == 0  # no intent was recorded: the call was never begun
    step = Step.objects.get(run=run, name="triage")
    assert (step.status, step.error_class) == (StepStatus.FAILED, ErrorClass.UNREADABLE)
    assert LedgerEntry.objects.count() == entries
    assert not ToolCall.objects.filter(step__run=run, status=StepStatus.UNKNOWN).exists()
    # The call is sent again under its own key, not the agent asked again.
    assert (advice.action.name, advice.step) == ("retry_tool_call", "triage")
    assert advice.call_slug == f"triage-{call.turn}-{call.index}"
    # Sent again while the key is still missing, it would fail at once: refused, naming it.
    with pytest.raises(TransitionNotAllowed, match="key 'old'"):
        advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
            reason="try again", step="triage", call=call.ref))
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}  # put back, after the current
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="triage", call=call.ref))
    run = advance(Run.objects.get(pk=run.pk))
    # A person's resend spends the approval (agent_operator.retry_tool_call): asked again
    # before the call is made.
    assert run.status == RunStatus.WAITING, run.status_message
    (again,) = transitions.waiting_tool_calls(run)
    assert again.pk == call.pk and LedgerEntry.objects.count() == entries
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=again.args_hash, approved=True,
                                 actor=Actor.system("second approver"))
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    call.refresh_from_db()
    assert (call.status, call.attempt) == (StepStatus.SUCCEEDED, 1)
    assert LedgerEntry.objects.count() == entries + 1
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_conversation_holding_a_value_that_cannot_be_opened_is_not_sent_to_the_model(
        live_sandbox, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=False, actor=ACTOR,
                                 comment="not this month")
    asked, entries = ModelCall.objects.count(), LedgerEntry.objects.count()

    # The model's next turn is sent the conversation, the declined call's arguments (sealed
    # whole on its turn: its tool declares a field sensitive) among it.
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    run = advance(run)

    advice = _held_for_the_key(run)
    step = Step.objects.get(run=run, name="triage")
    assert (step.status, step.error_class) == (StepStatus.FAILED, ErrorClass.UNREADABLE)
    assert ModelCall.objects.count() == asked and LedgerEntry.objects.count() == entries
    assert (advice.action.name, advice.step) == ("retry_step", "triage")

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="triage"))
    run = advance(Run.objects.get(pk=run.pk))
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert ModelCall.objects.count() > asked and LedgerEntry.objects.count() == entries


@pytest.fixture
def paying():
    """A read step whose result holds a bank account declared sensitive, a person's
    approval, and a high-impact write that sends the account, with a lookup by its key:
    what it sent is in `script`."""
    workflow = Workflow("test-sealed-result-read-later", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",), retry=FAST)
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        return {"order": ctx.input.order}

    @workflow.write("pay", impact="high", honours_key=True, retry=FAST)
    def pay(ctx):
        iban = ctx.results["fetch-account"]["iban"]  # read before anything is sent

        def send():  # kept by its key, as a receiver that honours keys keeps it
            ref = script.effects.setdefault(ctx.key, f"P-{len(script.effects) + 1}")
            return StepResult({"payment": f"{ref} from {iban[-4:]}"}, remote_ref=ref)

        return scripted_call(ctx, send)

    @pay.reconcile
    def find_payment(ctx):
        ref = script.effects.get(ctx.key)
        return Found(ref, {"payment": ref}) if ref else NotFound()

    yield workflow
    definition.registry.unregister(workflow)


@pytest.mark.django_db
def test_a_write_whose_code_cannot_open_an_earlier_result_may_have_sent_and_is_looked_up(
        paying, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run, _ = transitions.start_run(workflow="test-sealed-result-read-later",
                                   business_key="pay-sealed-1", input={"order": "o-1"},
                                   actor=ACTOR, wake=False)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    transitions.decide_approval(run.pk, step_name="approve", approved=True, actor=ACTOR)

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)

    # Its code ran: it may have sent before it read the value, so it is never called
    # failed (here it read first, and nothing was sent).
    assert run.status == RunStatus.ATTENTION, (run.status, run.status_message)
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message and "may have sent" in run.status_message
    pay = Step.objects.get(run=run, name="pay")
    assert (pay.status, pay.error_class) == (StepStatus.UNKNOWN, ErrorClass.UNREADABLE)
    assert script.effects == {} and [c for c in script.calls if c[0] == "pay"] == []
    advice = recommend(run, _steps(run))
    assert (advice.action.name, advice.step) == ("reconcile", "pay")
    assert "FIELD_ENCRYPTION_KEYS" in advice.why and "reseal_fields" in advice.why
    assert "may have sent" in advice.why and "nothing was sent" not in advice.why

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="pay"))
    run = Run.objects.get(pk=run.pk)
    pay.refresh_from_db()
    assert pay.status == StepStatus.FAILED  # not found: settled as not done
    assert recommend(run, _steps(run)).action.name == "retry_step"
    transitions.retry_step(run.pk, step_name="pay", actor=ACTOR, reason="not sent: send it")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    pay.refresh_from_db()
    assert list(script.effects) == [pay.idempotency_key]
    assert pay.result == {"payment": f"P-1 from {IBAN[-4:]}"}


@pytest.fixture
def reserving():
    """A read step whose result holds a bank account declared sensitive, and a low-impact
    write whose undo sends that account: what the undo sent is in `script.compensations`."""
    workflow = Workflow("test-sealed-result-read-by-an-undo", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",), retry=FAST)
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.write("reserve", impact="low", honours_key=True, retry=FAST)
    def reserve(ctx):
        return scripted_call(ctx, lambda: StepResult({"reserved": True}, remote_ref="R-1"))

    @reserve.compensate
    def release(ctx):
        iban = ctx.results["fetch-account"]["iban"]  # read before anything is sent
        ref = script.compensations.setdefault(ctx.key, f"refund to {iban[-4:]}")
        return StepResult({"released": True}, remote_ref=ref)

    @workflow.write("ship", honours_key=True, retry=FAST)
    def ship(ctx):
        return scripted_call(ctx, lambda: StepResult({"shipped": True}, remote_ref="S-1"))

    yield workflow
    definition.registry.unregister(workflow)


@pytest.mark.django_db
def test_an_undo_reading_a_result_that_cannot_be_opened_holds_the_compensation(reserving,
                                                                               settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run, _ = transitions.start_run(workflow="test-sealed-result-read-by-an-undo",
                                   business_key="reserve-sealed-1", input={"order": "o-1"},
                                   actor=ACTOR, wake=False)
    script.plan["ship"] = [PermanentError("no such address")]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    transitions.compensate(run.pk, actor=ACTOR, reason="order withdrawn")
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)

    assert run.status == RunStatus.COMPENSATION_FAILED, run.status_message
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message
    reserve = Step.objects.get(run=run, name="reserve")
    assert (reserve.status, reserve.error_class) == (StepStatus.COMPENSATION_FAILED,
                                                     ErrorClass.UNREADABLE)
    assert script.compensations == {}
    advice = recommend(run, _steps(run))
    assert advice.action.name == "compensate"
    # Its code read the value: whether it sent before is not known, so it is not said.
    assert "FIELD_ENCRYPTION_KEYS" in advice.why and "nothing was sent" not in advice.why

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    reserve.refresh_from_db()
    assert script.compensations == {reserve.compensation_key: f"refund to {IBAN[-4:]}"}
