"""A kept event that the run waiting for it refuses (its payload fails the schema of the
run's own version) is said on that run, so that a person looking at the waiting run sees
that an event came and why it was not delivered: one event_refused record, on the waiting
step, naming the event (source:id) and the failing fields, never the payload's values. It
is written with the mark on the kept row, by the one path that marks it (the run beginning
to wait, or the sweeper's pass, whichever comes first), appended to the run's chain; no
later look records it again, and the run's state does not change."""

import json
from datetime import timedelta

import pytest
from pydantic import BaseModel

from audit.actions import AuditAction
from audit.chain import Actor, verify_chain
from audit.models import AuditRecord
from console.timeline import timeline_page
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunEvent, RunStatus, StepStatus
from runs.waiting import events, kept, payloads
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
PSP = Actor.system("psp")
SECRET = "sk_live_do_not_log"
# Accepted at the door by version 2's schema, refused by version 1's (no amount).
SHAPED_FOR_V2 = {"amount_cents": 73219, "reference": SECRET}


class V1(BaseModel):
    amount: int
    reference: str


class V2(BaseModel):
    amount_cents: int


def _version(version: int, schema) -> Workflow:
    workflow = Workflow("test-refused-kept", version=version, input=OrderIn)
    workflow.wait_for_event("payment", event="paid", schema=schema,
                            timeout=timedelta(hours=1), on_timeout="escalate")

    @workflow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get("payment")})

    return workflow


@pytest.fixture
def old_run_waiting_with_an_event_kept_for_the_new_version(script):
    """A run of version 1, waiting; before it waited, an event in version 2's shape came and
    was kept. Nothing has looked at the kept event since the run began to wait."""
    made = [_version(1, V1)]
    run = new_run("test-refused-kept")
    made.append(_version(2, V2))
    receipt = events.receive_event(workflow=run.workflow_name, event="paid",
                                   key=run.business_key, event_id="evt-1", source="psp",
                                   payload=SHAPED_FOR_V2, actor=PSP)
    assert receipt == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    yield run
    for workflow in made:
        registry.unregister(workflow)


def _refusals(run: Run) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_REFUSED))


def _meet(run: Run, first: str) -> None:
    if first == "the run beginning to wait":
        assert not kept.consume_kept_for_run(run.pk)
    else:
        assert kept.consume_kept_events() == 0


def _as_it_was(run: Run) -> tuple:
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.status_message, run.updated_at, run.next_wake_at,
            step(run, "payment").status, step(run, "payment").result,
            RunEvent.objects.filter(run_id=run.pk).count())


@pytest.mark.parametrize("first", ["the run beginning to wait", "the sweeper's pass"])
def test_the_first_look_records_the_refusal_on_the_run_once_and_no_later_look_does(
        old_run_waiting_with_an_event_kept_for_the_new_version, first):
    run = old_run_waiting_with_an_event_kept_for_the_new_version
    records_before = AuditRecord.objects.filter(run=run).count()
    before = _as_it_was(run)

    _meet(run, first)
    (refused,) = _refusals(run)

    # Every later look, by either path, passes over it.
    for _ in range(2):
        assert kept.consume_kept_events() == 0
        assert not kept.consume_kept_for_run(run.pk)
    assert _refusals(run) == [refused]
    # The run waits on as it did: no status, step or progress event moved.
    assert _as_it_was(run) == before
    assert before[0] == RunStatus.WAITING and before[4] == StepStatus.WAITING
    # The one refusal, appended to the run's chain, and nothing else.
    assert AuditRecord.objects.filter(run=run).count() == records_before + 1
    assert verify_chain(AuditRecord.objects.filter(run=run).order_by("seq")) is None

    row = ExternalEvent.objects.get(event_id="evt-1")
    assert (row.refused_run_id, row.refused_at) == (run.pk, refused.created_at)
    assert refused.step_name == "payment"
    assert (refused.actor_kind, refused.actor_label) == ("system", "event psp")
    assert refused.data["event"] == "psp:evt-1"
    assert refused.data["fields"] == ["payload.amount"]
    assert "version 1" in refused.data["error"] and "payload.amount" in refused.data["error"]
    # The payload's values stay in the kept row: the log names where it fails, not what.
    written = json.dumps([refused.reason, refused.data, refused.before, refused.after])
    assert SECRET not in written and "73219" not in written


def test_a_second_refusal_of_the_same_kept_event_records_nothing(
        old_run_waiting_with_an_event_kept_for_the_new_version):
    run = old_run_waiting_with_an_event_kept_for_the_new_version
    row = ExternalEvent.objects.get(event_id="evt-1")
    refused = payloads.EventRefused("fails", [{"loc": ["payload", "amount"], "msg": "missing"}])

    # Two paths that met the row before either marked it: only the one that marks it says so.
    assert kept.refuse_kept(row, step(run, "payment"), refused)
    assert not kept.refuse_kept(row, step(run, "payment"), refused)

    assert len(_refusals(run)) == 1


def test_a_kept_event_consumed_meanwhile_is_neither_marked_refused_nor_recorded(
        old_run_waiting_with_an_event_kept_for_the_new_version):
    run = old_run_waiting_with_an_event_kept_for_the_new_version
    row = ExternalEvent.objects.get(event_id="evt-1")
    ExternalEvent.objects.filter(pk=row.pk).update(consumed_at=row.received_at,
                                                   consumed_run_id=run.pk)
    refused = payloads.EventRefused("fails", [{"loc": ["payload", "amount"], "msg": "missing"}])

    assert not kept.refuse_kept(row, step(run, "payment"), refused)

    row.refresh_from_db()
    assert row.refused_at is None
    assert _refusals(run) == []


def test_the_run_page_shows_the_refused_event_on_its_timeline(
        old_run_waiting_with_an_event_kept_for_the_new_version):
    run = old_run_waiting_with_an_event_kept_for_the_new_version
    assert not kept.consume_kept_for_run(run.pk)

    shown = [e for e in timeline_page(run).entries if e.title == "event refused"]

    assert len(shown) == 1
    assert shown[0].step == "payment"
    assert "payload.amount" in shown[0].detail and "psp:evt-1" in shown[0].data
