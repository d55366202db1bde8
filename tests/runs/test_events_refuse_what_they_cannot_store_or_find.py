"""What an event wait refuses, and what it builds to fit, so that nothing fails in the
database or half-way through a transition:

- a wait may not name an event with ':' (the waiting step names what it waits for as
  "awaiting-event:<event>:<key>", where a ':' in the event would be read as the key);
- receive_event refuses a payload nested deeper than MAX_PAYLOAD_DEPTH, a payload holding
  text the database cannot store (a NUL), and fields longer than their columns, with
  EventRefused naming the problem: nothing is kept and the waiting run does not move;
- an event a person delivers by hand to a step with a long name gets an id that fits;
- an event is checked against the schema of the version of the run it is delivered to,
  not the newest version's; a kept event that version refuses is marked refused with the
  reason, said once at warning level by whichever path meets it first, and not tried again.
"""

import json
from datetime import timedelta

import pytest
from pydantic import BaseModel

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, ActionInputError
from runs.waiting import events
from runs.waiting.kept import consumable_kept, consume_kept_events, consume_kept_for_run
from runs.waiting.payloads import EventRefused
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, PaymentSettled, scripted_call

pytestmark = pytest.mark.django_db
PSP = Actor.system("psp")
OLGA = Actor(kind="user", label="olga")
PAID = {"amount": 120, "reference": "PSP-77"}


def _workflow(name: str, *, version: int = 1, schema=None, step_name: str = "payment",
              event: str = "paid") -> Workflow:
    workflow = Workflow(name, version=version, input=OrderIn)
    workflow.wait_for_event(step_name, event=event, schema=schema,
                            timeout=timedelta(hours=1), on_timeout="escalate")

    @workflow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get(step_name)})

    return workflow


@pytest.fixture
def declared():
    """Declares workflows for one test, and forgets them after it."""
    made = []

    def declare(*args, **kwargs):
        made.append(_workflow(*args, **kwargs))
        return made[-1]

    yield declare
    for workflow in made:
        registry.unregister(workflow)


def waiting(workflow: str) -> Run:
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    return run


def send(run_or_workflow, key: str, *, payload, event="paid", event_id="evt-1", **fields):
    workflow = getattr(run_or_workflow, "workflow_name", run_or_workflow)
    return events.receive_event(**{"workflow": workflow, "event": event, "key": key,
                                   "event_id": event_id, "source": "psp",
                                   "payload": payload, "actor": PSP, **fields})


def nested(depth: int) -> dict:
    """{} inside {"a": ...} until the value is `depth` objects deep."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def unchanged(run: Run, audit_count: int) -> bool:
    """The run still waits, its step too, and nothing was recorded about it."""
    run.refresh_from_db()
    return (run.status == RunStatus.WAITING
            and step(run, "payment").status == StepStatus.WAITING
            and AuditRecord.objects.filter(run=run).count() == audit_count)


# --- an event name with ':' -----------------------------------------------------------------

def test_a_wait_for_an_event_named_with_a_colon_is_refused_where_it_is_declared():
    workflow = Workflow("test-colon-event", version=1, input=OrderIn)
    with pytest.raises(ValueError, match="may not contain ':'"):
        workflow.wait_for_event("payment", event="stripe:payment.settled")
    assert not workflow.steps


def test_no_step_waits_for_an_event_named_with_a_colon_so_one_sent_is_refused():
    with pytest.raises(EventRefused, match="waits for an event"):
        send("test-payment-wait", "order-1", event="stripe:payment.settled", payload=PAID)
    assert not ExternalEvent.objects.exists()


# --- payloads nested too deep ---------------------------------------------------------------

@pytest.mark.parametrize("depth", [events.MAX_PAYLOAD_DEPTH + 1, 600, 5000])
def test_a_payload_nested_too_deep_is_refused_and_the_waiting_run_does_not_move(
        script, declared, depth):
    declared("test-deep-payload")  # no schema: the payload would be stored as it is
    run = waiting("test-deep-payload")
    audits = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(EventRefused, match="nested deeper than") as refused:
        send(run, run.business_key, payload=nested(depth))
    assert refused.value.errors == [{"loc": ["payload"], "msg": "nested deeper than "
                                     f"{events.MAX_PAYLOAD_DEPTH} levels of objects and lists"}]
    assert not ExternalEvent.objects.exists()
    assert unchanged(run, audits)


def test_a_payload_nested_too_deep_for_no_run_yet_is_not_kept(declared):
    declared("test-deep-payload")
    with pytest.raises(EventRefused, match="nested deeper than"):
        send("test-deep-payload", "order-1", payload={"list": [nested(600)]})
    assert not ExternalEvent.objects.exists()


def test_a_payload_exactly_as_deep_as_allowed_is_delivered(script, declared):
    declared("test-deep-payload")
    run = waiting("test-deep-payload")
    payload = nested(events.MAX_PAYLOAD_DEPTH)
    assert send(run, run.business_key, payload=payload) == events.Receipt("delivered", run.pk)
    assert step(run, "payment").result == payload


# --- text the database cannot store in the payload ------------------------------------------

def test_a_nul_in_the_payload_of_an_awaited_event_is_refused_and_the_run_does_not_move(
        script):
    run = waiting("test-payment-wait")
    audits = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(EventRefused, match="NUL") as refused:
        send(run, run.business_key, event="payment.settled",
             payload={"amount": 1, "reference": "a\x00b"})
    assert refused.value.errors[0]["loc"] == ["payload"]
    assert "reference" in refused.value.errors[0]["msg"]
    assert not ExternalEvent.objects.exists()
    assert unchanged(run, audits)


def test_a_nul_in_the_payload_of_an_event_to_keep_is_refused_and_nothing_is_kept():
    with pytest.raises(EventRefused, match="NUL"):
        send("test-payment-wait", "nobody-waits-yet", event="payment.settled",
             payload={"amount": 1, "reference": "a\x00b"})
    assert not ExternalEvent.objects.exists()


def test_a_nul_in_a_key_of_the_payload_is_refused(declared):
    declared("test-deep-payload")
    with pytest.raises(EventRefused, match="NUL"):
        send("test-deep-payload", "order-1", payload={"a\x00b": 1})
    assert not ExternalEvent.objects.exists()


# --- fields longer than their columns -------------------------------------------------------

@pytest.mark.parametrize(("field", "given"), [
    ("source", {"source": "s" * 101}),
    ("event_id", {"event_id": "e" * 201}),
    ("correlation_key", {"key": "k" * 301}),
])
def test_a_field_longer_than_its_column_is_refused_naming_it(field, given):
    sent = {"key": "order-1", **given}
    with pytest.raises(EventRefused, match=field) as refused:
        send("test-payment-wait", sent.pop("key"), event="payment.settled", payload=PAID,
             **sent)
    assert [e["loc"] for e in refused.value.errors] == [[field]]
    assert not ExternalEvent.objects.exists()


def test_a_long_source_is_made_to_fit_its_column_and_stays_its_own():
    one, other = "api-token:" + "p" * 100, "api-token:" + "p" * 99 + "q"
    assert len(events.fitting_source(one)) == events.FIELD_LENGTHS["source"]
    assert events.fitting_source(one) == events.fitting_source(one)
    assert events.fitting_source(one) != events.fitting_source(other)
    assert events.fitting_source("api-token:psp") == "api-token:psp"


# --- delivered by hand to a step with a long name -------------------------------------------

def test_an_event_delivered_by_hand_to_a_step_with_a_long_name_gets_an_id_that_fits(
        script, declared):
    long_name = "p" * 190  # a step's name may be 200 characters
    declared("test-long-step", schema=PaymentSettled, step_name=long_name)
    run = new_run("test-long-step")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="the PSP confirmed it on the phone", evidence=json.dumps(PAID)))
    kept = ExternalEvent.objects.get()
    assert (kept.source, kept.consumed_run_id, kept.consumed_step) == ("operator", run.pk,
                                                                       long_name)
    assert len(kept.event_id) <= 200 and kept.event_id.startswith(f"run-{run.pk}-sha256=")
    assert step(run, long_name).status == StepStatus.SUCCEEDED
    assert step(run, long_name).result == PAID
    assert len(step(run, long_name).remote_ref) <= 300


def test_a_long_source_and_id_still_name_the_event_on_the_step_that_received_it(script):
    run = waiting("test-payment-wait")
    source, event_id = "s" * 100, "e" * 200
    receipt = send(run, run.business_key, event="payment.settled", payload=PAID,
                   source=source, event_id=event_id)
    assert receipt == events.Receipt("delivered", run.pk)
    ref = step(run, "payment").remote_ref
    assert len(ref) <= 300 and ref.startswith(f"event:{source}:sha256=")
    assert ExternalEvent.objects.get().event_id == event_id


# --- an event for a run of an older version -------------------------------------------------

class V1(BaseModel):
    amount: int
    reference: str


class V2(BaseModel):
    amount_cents: int


def test_an_event_for_a_run_of_an_older_version_is_checked_against_that_version(
        script, declared):
    declared("test-versions", version=1, schema=V1)
    old = waiting("test-versions")
    declared("test-versions", version=2, schema=V2)
    new = waiting("test-versions")
    assert (old.workflow_version, new.workflow_version) == (1, 2)

    assert send(old, old.business_key, payload={"amount": 5, "reference": "r"}) == \
        events.Receipt("delivered", old.pk)
    assert step(old, "payment").result == {"amount": 5, "reference": "r"}
    assert send(new, new.business_key, payload={"amount_cents": 500}, event_id="e2") == \
        events.Receipt("delivered", new.pk)
    assert step(new, "payment").result == {"amount_cents": 500}


def test_an_event_shaped_for_another_version_than_its_runs_is_refused_and_changes_nothing(
        script, declared):
    declared("test-versions", version=1, schema=V1)
    old = waiting("test-versions")
    declared("test-versions", version=2, schema=V2)
    audits = AuditRecord.objects.filter(run=old).count()
    with pytest.raises(EventRefused, match="version 1") as refused:
        send(old, old.business_key, payload={"amount_cents": 500})
    assert {tuple(e["loc"]) for e in refused.value.errors} == {("payload", "amount"),
                                                               ("payload", "reference")}
    assert not ExternalEvent.objects.exists()
    assert unchanged(old, audits)


def test_a_payload_no_version_accepts_is_refused_at_the_door(declared):
    declared("test-versions", version=1, schema=V1)
    declared("test-versions", version=2, schema=V2)
    with pytest.raises(EventRefused, match="V2"):
        send("test-versions", "order-1", payload={"nothing": "useful"})
    assert not ExternalEvent.objects.exists()


def test_an_event_kept_early_reaches_a_run_of_an_older_version_shaped_for_it(
        script, declared):
    declared("test-versions", version=1, schema=V1)
    run = new_run("test-versions")
    declared("test-versions", version=2, schema=V2)
    assert send(run, run.business_key, payload={"amount": 5, "reference": "r"}) == \
        events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert consume_kept_for_run(run.pk)
    assert step(run, "payment").result == {"amount": 5, "reference": "r"}


def test_an_event_kept_early_in_another_versions_shape_stays_kept_and_the_run_waits(
        script, declared):
    declared("test-versions", version=1, schema=V1)
    run = new_run("test-versions")
    declared("test-versions", version=2, schema=V2)
    assert send(run, run.business_key, payload={"amount_cents": 500}) == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    audits = AuditRecord.objects.filter(run=run).count()
    assert not consume_kept_for_run(run.pk)
    assert ExternalEvent.objects.get().consumed_at is None
    # Said on the run (the refusal's one record), which moved no further.
    assert unchanged(run, audits + 1)
    assert AuditRecord.objects.filter(run=run).latest("seq").action == "event_refused"


@pytest.mark.parametrize("first", ["the run beginning to wait", "the sweeper's pass"])
def test_a_kept_event_the_runs_version_refuses_is_marked_refused_and_said_once(
        script, declared, caplog, first):
    declared("test-versions", version=1, schema=V1)
    run = new_run("test-versions")
    declared("test-versions", version=2, schema=V2)
    assert send(run, run.business_key, payload={"amount_cents": 500}) == events.Receipt("kept")
    # The run waits; whichever path meets the kept event first (the worker's look after the
    # wait, or the sweeper's backstop where that look was lost) says it, the same way.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    audits = AuditRecord.objects.filter(run=run).count()
    kept = ExternalEvent.objects.get()
    with caplog.at_level("DEBUG", logger="runs.waiting"):
        if first == "the run beginning to wait":
            assert not consume_kept_for_run(run.pk)
        for _ in range(3):
            assert consume_kept_events() == 0
        assert not consume_kept_for_run(run.pk)

    said = [r for r in caplog.records if r.getMessage().startswith(f"kept event {kept.pk} ")]
    assert [r.levelname for r in said] == ["WARNING"]
    assert f"refused by run {run.pk}" in said[0].getMessage()
    assert "payload.amount: Field required" in said[0].getMessage()
    kept.refresh_from_db()
    assert (kept.consumed_at, kept.refused_run_id) == (None, run.pk)
    assert kept.refused_at is not None
    assert kept.refused_reason == (
        f"run {run.pk} (version 1) waits for it: payload of paid does not match V1: "
        "payload.amount: Field required; payload.reference: Field required")
    # Not tried again: no pass finds it, and the run waits on, nothing recorded on it but
    # the one refusal (the first look's).
    assert consumable_kept() == []
    assert unchanged(run, audits + 1)
    assert AuditRecord.objects.filter(run=run, action="event_refused").count() == 1
    # An event shaped for the run's version still reaches it.
    assert send(run, run.business_key, payload={"amount": 5, "reference": "r"},
                event_id="evt-2") == events.Receipt("delivered", run.pk)


def test_a_payload_delivered_by_hand_is_checked_against_the_runs_own_version(
        script, declared):
    declared("test-versions", version=1, schema=V1)
    old = waiting("test-versions")
    declared("test-versions", version=2, schema=V2)
    audits = AuditRecord.objects.filter(run=old).count()
    # The newest version's shape, which the run's own version does not accept.
    with pytest.raises(ActionInputError, match="version 1"):
        ACTIONS["event_received"].perform(
            old.pk, actor=OLGA, given=ActionInput(reason="confirmed by phone",
                                                  evidence='{"amount_cents": 500}'))
    assert not ExternalEvent.objects.exists()
    assert unchanged(old, audits)

    ACTIONS["event_received"].perform(
        old.pk, actor=OLGA, given=ActionInput(reason="confirmed by phone",
                                              evidence='{"amount": 5, "reference": "r"}'))
    assert step(old, "payment").result == {"amount": 5, "reference": "r"}
