"""A sleep's until(input) and an event wait's correlate(input) are called when the run is
started, with the input as the run will hold it, by the checks the wait applies when the run
reaches it. A start whose input one of them raises on, or gives what the wait cannot use
with (a datetime without a time zone, text, None, a key no event can carry, a time the
database cannot keep), is refused naming the step and what is wrong, and nothing is written:
no run, no step, no audit record. Before, the start was taken, and the run was held weeks
later at the wait as "definition missing". A good input starts, and its run waits under the
key and until the time the start was checked with."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.errors import InvalidInput
from runs.machine.transitions import start_run
from runs.models import Run, RunEvent, RunStatus, Step, StepStatus, Workflow
from runs.waiting import events
from tests.factories import step
from tests.runs.supplier_waits import (
    EVENT,
    NAME,
    AwareIn,
    NaiveIn,
    by_po_number,
    declaring,
)

pytestmark = pytest.mark.django_db
declare = pytest.fixture(declaring, name="declare")
ERP = Actor.system("erp")
NAIVE = {"order_number": "ON-7", "delivery_date": "2099-12-24T10:00:00"}
AWARE = {"po_number": "PO-7", "delivery_date": "2099-12-24T10:00:00+01:00"}


def _nothing_written() -> None:
    assert not Run.objects.exists()
    assert not Step.objects.exists()
    assert not RunEvent.objects.exists()
    assert not AuditRecord.objects.exists()
    assert not Workflow.objects.filter(name=NAME).exists()


def _refusal(data) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        start_run(workflow=NAME, business_key="so-1", input=data, actor=ERP)
    return refused.value


@pytest.mark.parametrize(("model", "data", "functions", "named"), [
    (NaiveIn, NAIVE, {"until": lambda data: datetime(2099, 1, 1, tzinfo=UTC)},
     "step 'supplier-confirmation': its correlate(input) raised KeyError: 'po_number'"),
    (NaiveIn, NAIVE, {"correlate": lambda data: data.get("po_number"),
                      "until": lambda data: datetime(2099, 1, 1, tzinfo=UTC)},
     "step 'supplier-confirmation': its correlate(input) returned None, not the correlation "
     "key as text"),
    (AwareIn, AWARE, {"correlate": lambda data: data["amount"]},
     "step 'supplier-confirmation': its correlate(input) returned an int (100), not the "
     "correlation key as text"),
    (AwareIn, AWARE, {"correlate": lambda data: data["po_number"] + "\n"},
     "step 'supplier-confirmation': its correlate(input) returned a key no event can carry: "
     "contains control characters"),
    (NaiveIn, NAIVE, {"correlate": lambda data: data["order_number"]},
     "step 'until-delivery': its until(input) returned a datetime without a time zone "
     "(2099-12-24T10:00:00): declare the input field as AwareDatetime or give it a zone"),
    (NaiveIn, NAIVE, {"correlate": lambda data: data["order_number"],
                      "until": lambda data: data["delivery_date"]},
     "step 'until-delivery': its until(input) returned text ('2099-12-24T10:00:00'), not "
     "an aware datetime"),
    (AwareIn, AWARE,
     {"until": lambda data: datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))},
     "step 'until-delivery': its until(input) returned a time the database cannot keep: "
     "9999-12-31T23:00:00-05:00 is after what the database can keep"),
])
def test_a_start_its_waits_fail_with_is_refused_naming_the_step_and_writes_nothing(
        declare, model, data, functions, named):
    declare(model, **functions)
    refused = _refusal(data)
    assert str(refused).startswith(f"input for {NAME} is refused: ")
    assert named in str(refused)
    assert [e["msg"] for e in refused.errors] == [str(refused).split(": ", 1)[1]]
    _nothing_written()


def test_each_wait_that_fails_is_named(declare):
    declare(NaiveIn)
    refused = _refusal(NAIVE)
    assert [e["msg"] for e in refused.errors] == [
        "step 'supplier-confirmation': its correlate(input) raised KeyError: 'po_number'",
        "step 'until-delivery': its until(input) returned a datetime without a time zone "
        "(2099-12-24T10:00:00): declare the input field as AwareDatetime or give it a zone"]
    _nothing_written()


def test_a_function_broken_for_every_input_is_refused_at_the_start_too(declare):
    def broken(data):
        raise RuntimeError("the supplier client is not configured")

    declare(AwareIn, correlate=broken)
    assert "step 'supplier-confirmation': its correlate(input) raised RuntimeError: the " \
           "supplier client is not configured" in str(_refusal(AWARE))
    _nothing_written()


def test_a_good_input_starts_and_its_run_waits_under_that_key_until_that_time(declare):
    declare(AwareIn)
    run, created = start_run(workflow=NAME, business_key="so-1", input=AWARE, actor=ERP)
    assert created
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "supplier-confirmation").remote_ref == f"awaiting-event:{EVENT}:PO-7"
    receipt = events.receive_event(workflow=NAME, event=EVENT, key="PO-7", event_id="c-1",
                                   source="supplier", payload={}, actor=ERP)
    assert receipt == events.Receipt("delivered", run.pk)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    nap = step(run, "until-delivery")
    assert nap.status == StepStatus.WAITING
    assert nap.next_attempt_at == datetime(2099, 12, 24, 9, 0, tzinfo=UTC)


def test_the_functions_get_the_input_as_the_run_keeps_it_and_change_nothing_stored(declare):
    given = []

    def correlate(data):
        given.append(dict(data))
        data.pop("po_number")  # a function that changes what it is given
        return "PO-7"

    declare(AwareIn, correlate=correlate)
    run, _ = start_run(workflow=NAME, business_key="so-1", input=AWARE, actor=ERP)
    # The schema's default filled in, the date as JSON holds it: what the wait gets later.
    assert given == [{**AWARE, "amount": 100}]
    assert Run.objects.get(pk=run.pk).input == {**AWARE, "amount": 100}
    assert by_po_number(Run.objects.get(pk=run.pk).input) == "PO-7"
