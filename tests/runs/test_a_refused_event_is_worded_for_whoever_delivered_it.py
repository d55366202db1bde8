"""One function words a refused event (runs.waiting.payloads.refusal): the same reason,
ended by what is true for whoever delivered it. A sender at the event door is told that
nothing was kept; a person delivering the event by hand (Deliver event, from the runtime's
action table or the CLI) that nothing was delivered, never "nothing was kept", which says
nothing about their own action. Either way nothing is written."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command

from api.tokens import token_create
from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, ActionInputError
from runs.waiting import events, payloads
from runs.waiting.events import MAX_PAYLOAD_DEPTH
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
NESTED = '{"amount": 5, "reference": "PSP-9", "extra": ' + "[" * (MAX_PAYLOAD_DEPTH + 1) \
         + "]" * (MAX_PAYLOAD_DEPTH + 1) + "}"
DEEP_REASON = f"the payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels of objects and lists"
WRONG_SHAPE = '{"amount": "five"}'
SHAPE_REASON = ("payload of payment.settled does not match PaymentSettled: payload.amount: "
                "Input should be a valid integer, unable to parse string as an integer; "
                "payload.reference: Field required")


@pytest.fixture
def waiting_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk)


def _written(run) -> tuple:
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, step(run, "payment").status,
            AuditRecord.objects.filter(run=run).count(), ExternalEvent.objects.count())


def _by_hand(run, evidence: str) -> str:
    with pytest.raises(ActionInputError) as refused:
        ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
            reason="the provider confirmed it by phone", evidence=evidence))
    return str(refused.value)


@pytest.mark.parametrize(("evidence", "reason"), [
    ("not json", "the payload is not JSON"),
    (NESTED, DEEP_REASON),
    (WRONG_SHAPE, SHAPE_REASON),
])
def test_a_hand_delivery_refused_says_nothing_was_delivered(waiting_run, evidence, reason):
    before = _written(waiting_run)

    message = _by_hand(waiting_run, evidence)

    assert message == f"{reason}; nothing was delivered"
    assert "kept" not in message
    assert _written(waiting_run) == before
    assert step(waiting_run, "payment").status == StepStatus.WAITING
    assert ExternalEvent.objects.count() == 0


def test_the_cli_says_so_too(waiting_run, monkeypatch):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    before = _written(waiting_run)

    with pytest.raises(CommandError) as refused:
        call_command("run_action", str(waiting_run.pk), "event_received", "--user", "olga",
                     "--reason", "confirmed by phone", "--evidence", "not json",
                     stdout=io.StringIO())

    assert str(refused.value) == ("Deliver event was not done: the payload is not JSON; "
                                  "nothing was delivered")
    assert _written(waiting_run) == before


def test_the_door_tells_a_sender_nothing_was_kept_with_the_same_reason(waiting_run, client):
    before = _written(waiting_run)
    deep = json.loads(NESTED)

    with pytest.raises(payloads.EventRefused) as refused:
        events.receive_event(workflow="test-payment-wait", event="payment.settled",
                             key=waiting_run.business_key, event_id="evt-1", source="psp",
                             payload=deep, actor=Actor.system("psp"))
    _, token = token_create(name="psp", workflows=["test-payment-wait"])
    answer = client.post("/api/events", {
        "workflow": "test-payment-wait", "event": "payment.settled", "event_id": "evt-2",
        "correlation_key": waiting_run.business_key, "payload": deep,
    }, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert str(refused.value) == f"{DEEP_REASON}; nothing was kept"
    assert refused.value.reason == DEEP_REASON
    assert answer.status_code == 422
    assert answer.json()["detail"] == f"{DEEP_REASON}; nothing was kept"
    assert _written(waiting_run) == before
    assert ExternalEvent.objects.count() == 0


def test_one_function_words_both_from_one_reason():
    refused = payloads.EventRefused("the payload is not JSON", nothing_kept=True)

    assert payloads.refusal(refused) == str(refused) == "the payload is not JSON; nothing was kept"
    assert payloads.refusal(refused, by_hand=True) == ("the payload is not JSON; nothing was "
                                                       "delivered")
    # A refusal the door words without the sentence keeps its words for a sender.
    unknown = payloads.EventRefused("unknown workflow 'x'")
    assert str(unknown) == "unknown workflow 'x'"
    assert payloads.refusal(unknown, by_hand=True) == "unknown workflow 'x'; nothing was delivered"
