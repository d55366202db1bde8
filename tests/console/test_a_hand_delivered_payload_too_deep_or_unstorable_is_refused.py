"""An event delivered by hand (event_received, its payload given as evidence) is held to the
rules of an event sent to the door (runs.waiting.events): a payload nested deeper than
MAX_PAYLOAD_DEPTH, even deeper than Python's stack, holding text the database cannot
store (NUL, a lone surrogate) or a number that is not finite (NaN, Infinity, or 1e400, which
overflows) is refused naming the problem, on every path (act, which the
console, the API and the CLI call), and nothing is written."""

import io

import pytest
from django.core.management import CommandError, call_command

from approvals.operator_actions import ActionInputError, act
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.storable import NUL_PROBLEM, SURROGATE_PROBLEM
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from runs.waiting.events import MAX_PAYLOAD_DEPTH
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db

TOO_DEEP = f"nested deeper than {MAX_PAYLOAD_DEPTH} levels of objects and lists"


def _nested(depth: int) -> str:
    return '{"amount": 5, "reference": "PSP-9", "extra": ' + "[" * depth + "]" * depth + "}"


@pytest.fixture
def waiting_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, step(run, "payment").status,
            AuditRecord.objects.filter(run=run).count(), ExternalEvent.objects.count())


def _deliver(operator, run, payload: str):
    return act("event_received", run.pk, user=operator,
               given=ActionInput(reason="confirmed by phone", evidence=payload))


@pytest.mark.parametrize("depth", [5000, MAX_PAYLOAD_DEPTH + 1])
def test_a_payload_nested_too_deep_is_refused_naming_the_limit(operator, waiting_run, depth):
    before = _state(waiting_run)
    with pytest.raises(ActionInputError, match=TOO_DEEP):
        _deliver(operator, waiting_run, _nested(depth))
    assert _state(waiting_run) == before


@pytest.mark.parametrize(("text", "problem"), [("PSP\\u00009", NUL_PROBLEM),
                                               ("PSP\\ud8009", SURROGATE_PROBLEM)])
def test_a_payload_the_database_cannot_store_is_refused_naming_the_field(
        operator, waiting_run, text, problem):
    before = _state(waiting_run)
    with pytest.raises(ActionInputError) as refused:
        _deliver(operator, waiting_run, f'{{"amount": 5, "reference": "{text}"}}')
    assert problem in str(refused.value) and "$.reference" in str(refused.value)
    assert _state(waiting_run) == before


def test_a_key_the_database_cannot_store_is_refused_too(operator, waiting_run):
    before = _state(waiting_run)
    with pytest.raises(ActionInputError, match=NUL_PROBLEM):
        _deliver(operator, waiting_run, '{"amount": 5, "reference": "R", "a\\u0000b": 1}')
    assert _state(waiting_run) == before


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("field", ["amount", "extra"])
def test_a_payload_with_a_number_that_is_not_finite_is_refused_naming_it(
        operator, waiting_run, number, field):
    before = _state(waiting_run)
    payload = {"amount": "5", "reference": '"PSP-9"', field: number}
    text = "{" + ", ".join(f'"{name}": {value}' for name, value in payload.items()) + "}"
    with pytest.raises(ActionInputError, match=f"holds {number}, not a finite number"):
        _deliver(operator, waiting_run, text)
    assert _state(waiting_run) == before


def test_the_cli_refuses_them_with_a_command_error(operator, waiting_run):
    before = _state(waiting_run)
    for payload, problem in [(_nested(5000), TOO_DEEP),
                             ('{"amount": 5, "reference": "PSP\\u00009"}', NUL_PROBLEM)]:
        with pytest.raises(CommandError, match="Deliver event was not done") as refused:
            call_command("run_action", str(waiting_run.pk), "event_received", "--user", "olga",
                         "--reason", "confirmed by phone", "--evidence", payload,
                         stdout=io.StringIO())
        assert problem in str(refused.value)
    assert _state(waiting_run) == before


def test_a_payload_at_the_limit_is_delivered(operator, waiting_run):
    _deliver(operator, waiting_run, _nested(MAX_PAYLOAD_DEPTH - 1))
    assert step(Run.objects.get(pk=waiting_run.pk), "payment").status == StepStatus.SUCCEEDED
