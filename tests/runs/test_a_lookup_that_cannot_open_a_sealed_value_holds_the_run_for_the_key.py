"""A lookup by key that cannot open a sealed value it is asked with (a tool call's arguments,
an earlier step's result its reconcile function reads), because FIELD_ENCRYPTION_KEYS no
longer holds the key it was sealed with, holds the run for a person with the reason of a
sealed value (sealed_value_unreadable), its message naming the key and the cure. The outcome
stays unknown (nothing is claimed to have happened or not), and the lookup budget is not
spent on tries that cannot succeed until the key is back. Once it is, the operator's
Reconcile, which the next-step card offers, looks the effect up and settles it: the effect
made once, nothing sent again; should that lookup, the key back, not tell, the run waits for
a person to settle the outcome (unknown_outcome), no longer for the key. Before, such a lookup
failed as any lookup does, was asked again until the budget was spent, and held the run for
an unknown outcome."""

import pytest
from cryptography.fernet import Fernet

from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.agent_models import ToolCall
from runs.definitions import definition
from runs.definitions.definition import Found, NotFound, StepResult, Undetermined, Workflow
from runs.execution import executor
from runs.machine import sensitive, transitions
from runs.machine.errors import TransientError
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
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
    """Held for the key, the outcome still unknown, and the card says so and names the cure."""
    assert run.status == RunStatus.ATTENTION, (run.status, run.status_message)
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE, \
        run.status_message
    assert "'old'" in run.status_message and "FIELD_ENCRYPTION_KEYS" in run.status_message
    assert "still unknown" in run.status_message
    advice = recommend(run, _steps(run))
    assert advice.reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in advice.happened
    assert "FIELD_ENCRYPTION_KEYS" in advice.why and "reseal_fields" in advice.why
    assert "lookup" in advice.why and "still unknown" in advice.why
    # Nothing is claimed: the effect may stand.
    assert "nothing was sent" not in advice.why
    return advice


def _lookup_retries(run: Run) -> int:
    return AuditRecord.objects.filter(run=run,
                                      action=AuditAction.LOOKUP_RETRY_SCHEDULED).count()


@pytest.fixture
def paying():
    """A read step whose result holds a bank account declared sensitive, and a write that
    pays from it, looked up by its key and the account (the receiver's search asks for
    both): what it sent is in `script`; an Undetermined in script.lookup_errors is its
    answer."""
    workflow = Workflow("test-sealed-lookup-by-account", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",), retry=FAST)
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.write("pay", honours_key=True, retry=FAST)
    def pay(ctx):
        iban = ctx.results["fetch-account"]["iban"]

        def send():
            ref = script.effects.setdefault(ctx.key, f"pay-{len(script.effects) + 1}")
            return StepResult({"payment": ref, "from": iban[-4:]}, remote_ref=ref)

        return scripted_call(ctx, send)

    @pay.reconcile
    def find_payment(ctx):
        script.reconcile_calls.append((ctx.step, ctx.key))
        iban = ctx.results["fetch-account"]["iban"]
        if script.lookup_errors:
            error = script.lookup_errors.pop(0)
            if isinstance(error, Undetermined):
                return error
            raise error
        ref = script.effects.get(ctx.key)
        return Found(ref, {"payment": ref, "from": iban[-4:]}) if ref else NotFound()

    yield workflow
    definition.registry.unregister(workflow)


@pytest.mark.django_db
def test_a_steps_lookup_that_cannot_open_an_earlier_result_holds_the_run_for_the_key(
        paying, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run, _ = transitions.start_run(workflow="test-sealed-lookup-by-account",
                                   business_key="pay-lookup-sealed-1", input={"order": "o-1"},
                                   actor=ACTOR, wake=False)
    # The payment is made and its answer lost; the first lookup finds the receiver down.
    script.plan["pay"] = ["effect-then-raise"]
    script.lookup_errors.append(TransientError("payments search unavailable"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    pay = Step.objects.get(run=run, name="pay")
    assert (pay.status, pay.lookup_failures) == (StepStatus.UNKNOWN, 1)

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    run = advance(run)

    advice = _held_for_the_key(run)
    pay.refresh_from_db()
    assert pay.status == StepStatus.UNKNOWN  # neither done nor not done
    # One lookup with the key gone, and no more: no budget spent on it, none scheduled.
    assert len(script.reconcile_calls) == 2
    assert pay.lookup_failures == 1 and _lookup_retries(run) == 1
    assert run.next_wake_at is None
    assert "'old'" in pay.error_message
    # The payment was sent once and nothing was sent again.
    assert [c[0] for c in script.calls] == ["pay"]
    assert list(script.effects) == [pay.idempotency_key]
    assert (advice.action.name, advice.step) == ("reconcile", "pay")

    # Looked up again while the key is still missing: still unknown, still held for it.
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="look it up", step="pay"))
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message
    assert Step.objects.get(pk=pay.pk).status == StepStatus.UNKNOWN

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}  # put back, after the current
    advice = recommend(run, _steps(run))
    assert (advice.action.name, advice.step) == ("reconcile", "pay")
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="pay"))
    pay.refresh_from_db()
    assert (pay.status, pay.remote_ref) == (StepStatus.SUCCEEDED, "pay-1")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls] == ["pay"]
    assert script.effects == {pay.idempotency_key: "pay-1"}


@pytest.mark.django_db(transaction=True)
def test_a_tool_calls_lookup_that_cannot_open_its_arguments_holds_the_run_for_the_key(
        live_sandbox, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    assert sensitive.is_sealed(call.arguments["iban"])
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True, actor=ACTOR)
    entries = LedgerEntry.objects.count()
    # The posting is made and its answer lost; the first lookup finds the ledger down.
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=1)
    executor.advance_run(run.pk, worker="w1")
    call.refresh_from_db()
    assert (call.status, call.lookup_failures) == (StepStatus.UNKNOWN, 1)
    assert LedgerEntry.objects.count() == entries + 1

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    run = advance(Run.objects.get(pk=run.pk))

    advice = _held_for_the_key(run)
    call.refresh_from_db()
    assert call.status == StepStatus.UNKNOWN
    assert call.lookup_failures == 1 and _lookup_retries(run) == 1
    assert run.next_wake_at is None
    assert Step.objects.get(run=run, name="triage").status == StepStatus.UNKNOWN
    assert (advice.action.name, advice.step) == ("reconcile_tool_call", "triage")
    assert advice.call_slug == f"triage-{call.turn}-{call.index}"
    assert call.idempotency_key in advice.why
    assert LedgerEntry.objects.count() == entries + 1

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}  # put back, after the current
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="triage", call=call.ref))
    call.refresh_from_db()
    assert call.status == StepStatus.SUCCEEDED
    run = advance(Run.objects.get(pk=run.pk))
    assert run.status == RunStatus.COMPLETED, run.status_message
    call.refresh_from_db()
    assert (call.status, call.attempt) == (StepStatus.SUCCEEDED, 1)
    assert LedgerEntry.objects.count() == entries + 1
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1
    assert not ToolCall.objects.filter(step__run=run, tool="post-ledger") \
        .exclude(pk=call.pk).exists()


@pytest.mark.django_db
def test_a_run_held_for_the_key_whose_lookup_then_cannot_tell_waits_for_a_person_to_settle_it(
        paying, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run, _ = transitions.start_run(workflow="test-sealed-lookup-by-account",
                                   business_key="pay-lookup-sealed-2", input={"order": "o-2"},
                                   actor=ACTOR, wake=False)
    script.plan["pay"] = ["effect-then-raise"]
    script.lookup_errors.append(TransientError("payments search unavailable"))
    executor.advance_run(run.pk, worker="w1")
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    advice = _held_for_the_key(advance(run))

    # The key is back; the operator's Reconcile asks the lookup, which cannot tell.
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    script.lookup_errors.append(Undetermined("the payments search cannot tell for this key"))
    advice.action.perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="field key old put back", step="pay"))

    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    assert "cannot tell" in run.status_message
    advice = recommend(run, _steps(run))
    assert advice.reason == AttentionReason.UNKNOWN_OUTCOME
    assert "FIELD_ENCRYPTION_KEYS" not in advice.why
    pay = Step.objects.get(run=run, name="pay")
    assert pay.status == StepStatus.UNKNOWN  # still neither done nor not done
    # The lookup was asked three times (the runtime's two, the person's one); the payment
    # was sent once and nothing was sent again.
    assert len(script.reconcile_calls) == 3
    assert [c[0] for c in script.calls] == ["pay"]
    assert list(script.effects) == [pay.idempotency_key]
