"""start_run is idempotent on (workflow, business key, input), refuses a reused business key
with a different input, and leaves nothing behind when it refuses."""

import json

import pytest
from django.db import connection

from audit.models import AuditRecord
from runs.machine.errors import BusinessKeyConflict, InvalidInput, UnknownWorkflow
from runs.machine.transitions import start_run
from runs.models import Run, Step, Workflow
from tests.factories import SYSTEM
from tests.processes import manage

pytestmark = pytest.mark.django_db


def _counts():
    return Run.objects.count(), Step.objects.count(), AuditRecord.objects.count()


def test_start_creates_a_queued_run_with_a_pending_step_per_declared_step():
    run, created = start_run(workflow="test-orders", business_key="inv-1",
                             input={"order": "inv-1"}, actor=SYSTEM)
    assert created and run.status == "queued" and run.workflow_version == 1
    assert list(run.steps.values_list("name", "status")) == [
        ("fetch", "pending"), ("classify", "pending"), ("create-task", "pending"),
        ("post-ledger", "pending")]
    assert run.input == {"order": "inv-1", "amount": 100}
    assert AuditRecord.objects.get(run=run).action == "started"


def test_the_same_event_delivered_twice_gives_one_run():
    first, created1 = start_run(workflow="test-orders", business_key="inv-2",
                                input={"order": "inv-2"}, actor=SYSTEM)
    again, created2 = start_run(workflow="test-orders", business_key="inv-2",
                                input={"amount": 100, "order": "inv-2"}, actor=SYSTEM)
    assert (created1, created2) == (True, False) and again.pk == first.pk
    assert Run.objects.filter(business_key="inv-2").count() == 1


def test_a_reused_business_key_with_different_input_is_refused_naming_the_run():
    run, _ = start_run(workflow="test-orders", business_key="inv-3",
                       input={"order": "inv-3"}, actor=SYSTEM)
    before = _counts()
    with pytest.raises(BusinessKeyConflict, match=f"already used by run {run.pk}") as exc:
        start_run(workflow="test-orders", business_key="inv-3",
                  input={"order": "inv-3", "amount": 5}, actor=SYSTEM)
    assert exc.value.run_id == run.pk
    assert _counts() == before


def test_unknown_workflow_is_refused_and_nothing_is_written():
    before = _counts()
    with pytest.raises(UnknownWorkflow, match="unknown workflow 'nope'.*test-orders"):
        start_run(workflow="nope", business_key="k", input={}, actor=SYSTEM)
    assert _counts() == before and not Workflow.objects.filter(name="nope").exists()


def test_input_failing_the_schema_is_refused_field_by_field_and_nothing_is_written():
    before = _counts()
    with pytest.raises(InvalidInput, match="plan") as exc:
        start_run(workflow="customer-onboarding", business_key="c-1",
                  input={"email": "not-an-email", "name": "Ann", "plan": "gold"}, actor=SYSTEM)
    fields = {e["loc"][0] for e in exc.value.errors}
    assert fields == {"email", "plan"}
    assert _counts() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_from_separate_processes_give_one_run():
    payload = json.dumps({"email": "ann@example.com", "name": "Ann", "plan": "pro"})
    processes = [manage("start_run", "customer-onboarding", "tenant-7:c-42", "--input", payload)
                 for _ in range(8)]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    stdout = [out for out, _ in outputs]
    assert sum(line.startswith("started") for line in stdout) == 1
    assert sum(line.startswith("already exists") for line in stdout) == 7
    run = Run.objects.get(business_key="tenant-7:c-42")
    assert run.steps.count() == 3
    assert AuditRecord.objects.filter(run=run, action="started").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_command_refuses_bad_input_with_a_clear_message():
    process = manage("start_run", "customer-onboarding", "c-9", "--input", '{"plan": "gold"}')
    out, err = process.communicate(timeout=60)
    assert process.returncode != 0
    assert "does not match its schema" in err and "email" in err
    assert not Run.objects.filter(business_key="c-9").exists()


@pytest.mark.parametrize("key, data", [
    ("k" * 301, {"order": "o"}),
    ("bad\x00key", {"order": "o"}),
    ("good-key", {"order": "nul\x00inside"}),
    ("good-key", {"order": "lone \ud800 surrogate"}),
])
def test_unstorable_keys_and_input_are_refused_before_anything_is_written(key, data):
    before = _counts()
    with pytest.raises(InvalidInput):
        start_run(workflow="test-orders", business_key=key, input=data, actor=SYSTEM)
    assert _counts() == before


@pytest.mark.parametrize("key", ["inv-1\r\nBcc: evil@example.com", "tab\there", "bell\x07",
                                 "c1\x85control"])
def test_a_business_key_with_control_characters_is_refused_naming_the_field(key):
    before = _counts()
    with pytest.raises(InvalidInput, match="business key must not contain control") as info:
        start_run(workflow="test-orders", business_key=key, input={"order": "o"},
                  actor=SYSTEM)
    assert info.value.errors[0]["loc"] == ["business_key"]
    assert _counts() == before


def test_the_command_refuses_a_business_key_with_a_line_break():
    process = manage("start_run", "test-orders", "k-1\nBcc: x@example.com", "--input",
                     '{"order": "o"}')
    out, err = process.communicate(timeout=60)
    assert process.returncode != 0 and "control characters" in err
    assert not Run.objects.filter(business_key__startswith="k-1").exists()


@pytest.mark.django_db(transaction=True)
def test_a_start_that_waits_on_the_first_creation_of_its_workflow_row_still_starts_the_run():
    # Another start is creating the workflow's row and has not committed: this start's
    # statement waits on that row, and its snapshot (taken before) cannot see it once it is
    # committed. The start tries again instead of failing.
    import threading

    import psycopg

    # Its row is made by migrate (runs.definitions.workflow_rows): a workflow a release added
    # since the last migrate has none, and its first starts make it.
    Workflow.objects.filter(name="test-orders").delete()
    settings = connection.settings_dict
    blocker = psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432,
                              user=settings["USER"], password=settings["PASSWORD"],
                              dbname=settings["NAME"])
    blocker.execute("INSERT INTO runs_workflow (name, created_at) VALUES ('test-orders', now())")
    committed = threading.Timer(0.5, blocker.commit)
    committed.start()
    try:
        run, created = start_run(workflow="test-orders", business_key="inv-race",
                                 input={"order": "inv-race"}, actor=SYSTEM)
    finally:
        committed.join()
        blocker.close()
    workflow = Workflow.objects.get(name="test-orders")
    assert created and Run.objects.get(pk=run.pk).workflow_id == workflow.pk
    assert Run.objects.filter(business_key="inv-race").count() == 1
    assert AuditRecord.objects.filter(run=run).count() == 1
