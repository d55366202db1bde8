"""runs.store, the one object behind which PostgreSQL and SQLite differ, and the kernel on
top of it. Marked `store`: `make test` runs this file on PostgreSQL with the suite, and
again on SQLite (the demo's embedded database), so both paths are held to one
specification."""

import dataclasses
import hashlib
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from audit.chain import Actor, build_record, verify_chain
from audit.models import AuditRecord
from runs import store
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import BusinessKeyConflict, TransientError, TransitionNotAllowed
from runs.machine.keys import step_key
from runs.machine.single_pass import lock_key
from runs.machine.transitions import Outcome
from runs.models import Run, RunEvent, RunStatus, Step, StepStatus
from tests.factories import SYSTEM, make_due, new_run, step

pytestmark = [pytest.mark.django_db, pytest.mark.store]


def _steps(run):
    return list(Step.objects.filter(run=run).order_by("position"))


def _actions(run):
    return list(AuditRecord.objects.filter(run=run).order_by("seq")
                .values_list("action", "step_name"))


# --- the store's methods ----------------------------------------------------------------

def test_the_store_is_the_one_of_the_connections_database():
    assert store.current().name == connection.vendor


def test_sha256_hex_in_a_query_is_hashlibs_hexdigest_of_the_texts_utf8():
    run = new_run()
    for key in ("k" * 300, "clé-ü-€"):
        Run.objects.filter(pk=run.pk).update(business_key=key)
        digest = (Run.objects.filter(pk=run.pk)
                  .annotate(digest=store.current().sha256_hex("business_key"))
                  .values_list("digest", flat=True).get())
        assert digest == hashlib.sha256(key.encode()).hexdigest()


def test_the_json_parts_a_page_reads_are_taken_by_the_database_alike_on_both():
    db = store.current()
    value = {"b": [1, 2, 3, 4, 5], "a": {"runs": [7, 8], "keep": "x"},
             "effects": ["run 1: charge", "run 22: mail: sent", "run 3: post", "no head"],
             "objects": [{"k": 1}, [2], "three"]}
    run = new_run()
    Run.objects.filter(pk=run.pk).update(input=value)
    runs = Run.objects.filter(pk=run.pk)

    def read(expression):
        return runs.annotate(part=expression).values_list("part", flat=True).get()

    assert read(db.json_array_length(F("input"), ("b",))) == 5
    assert read(db.json_array_length(F("input"), ("a", "runs"))) == 2
    assert read(db.json_array_length(F("input"), ("nothing",))) is None
    assert read(db.json_array_part(F("input"), ("b",), start=1, stop=3)) == [2, 3]
    assert read(db.json_array_part(F("input"), ("b",), start=3)) == [4, 5]
    assert read(db.json_array_part(F("input"), ("b",), start=9, stop=12)) == []
    assert read(db.json_array_part(F("input"), ("nothing",), stop=2)) == []
    assert read(db.json_array_part(F("input"), ("objects",))) == [{"k": 1}, [2], "three"]
    assert read(db.json_array_part(F("input"), ("effects",),
                                   heads=["run 22", "run 3", "no head"])) == [
        "run 22: mail: sent", "run 3: post", "no head"]
    assert read(db.json_array_part(F("input"), ("effects",), heads=[])) == []
    shown = read(db.json_with(
        F("input"), removed=[("a", "runs"), ("nothing",)],
        replaced={("b",): db.json_array_part(F("input"), ("b",), stop=2),
                  ("effects",): ["run 1: charge"]}))
    assert shown == {**value, "b": [1, 2], "a": {"keep": "x"}, "effects": ["run 1: charge"]}
    assert list(shown) == list(Run.objects.get(pk=run.pk).input)  # each key where it was


def test_update_rows_writes_the_named_fields_of_many_rows_and_nothing_else():
    run = new_run()
    steps = _steps(run)
    for s in steps:
        s.status, s.error_message, s.remote_ref = StepStatus.SKIPPED, f"{s.name} x", "unsaved"
    store.current().update_rows(Step, steps, ["status", "error_message"])
    assert [(s.status, s.error_message, s.remote_ref) for s in _steps(run)] == [
        (StepStatus.SKIPPED, f"{s.name} x", "") for s in steps]


@dataclasses.dataclass
class _NotJson:
    amount: int


def test_a_row_holding_what_json_cannot_write_is_refused_and_nothing_is_written():
    # A value of a type JSON has no form for is a fault of the code that put it in a row:
    # refused by name, never written as some other form of it.
    run = new_run()
    steps = _steps(run)
    steps[0].result, steps[1].result = {"ok": 1}, _NotJson(5)
    with pytest.raises(TypeError, match="_NotJson"), transaction.atomic():
        store.current().update_rows(Step, steps[:2], ["result"])
    assert [s.result for s in _steps(run)[:2]] == [None, None]


def test_insert_rows_inserts_new_rows_and_nothing_when_given_none():
    run = new_run()
    now = timezone.now()
    before = RunEvent.objects.filter(run=run).count()
    store.current().insert_rows(RunEvent, [
        RunEvent(run_id=run.pk, status_from="queued", status_to="running", created_at=now),
        RunEvent(run_id=run.pk, status_from="running", status_to="waiting", created_at=now)])
    store.current().insert_rows(RunEvent, [])
    assert list(RunEvent.objects.filter(run=run).order_by("pk")
                .values_list("status_to", flat=True))[before:] == ["running", "waiting"]


def test_read_run_and_steps_reads_the_run_and_its_steps_in_order():
    run = new_run()
    read, steps = store.current().read_run_and_steps(run.pk)
    assert read.pk == run.pk and read.business_key == run.business_key
    assert read.input == run.input  # a JSON field comes back decoded
    assert [s.name for s in steps] == ["fetch", "classify", "create-task", "post-ledger"]
    assert all(s.run is read for s in steps)
    assert store.current().read_run_and_steps(run.pk + 10_000) == (None, [])


def test_read_run_and_steps_gives_each_time_as_the_orm_does():
    run = new_run()
    transitions.claim_run(run.pk, worker="w1")  # the claim and the first intent stamp times
    read, steps = store.current().read_run_and_steps(run.pk)
    orm = [Run.objects.get(pk=run.pk), *_steps(run)]
    for mine, theirs in zip([read, *steps], orm, strict=True):
        times = [f.attname for f in type(mine)._meta.concrete_fields
                 if f.get_internal_type() == "DateTimeField"]
        assert any(getattr(mine, t) is not None for t in times)
        for t in times:
            value, expected = getattr(mine, t), getattr(theirs, t)
            assert value == expected, t
            assert value is None or value.tzinfo is expected.tzinfo is UTC, t


def _checkpoint(run, *, token):
    """The rows of a made-up transition of `run` as its lease holder with `token` saw it."""
    steps = _steps(run)
    steps[0].status, steps[0].remote_ref = StepStatus.SUCCEEDED, "R-1"
    record = build_record(run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                          action="succeeded", actor=SYSTEM, step_name=steps[0].name,
                          created_at=timezone.now())
    expect = {"expect_token": token, "expect_status": run.status,
              "expect_seq": run.audit_seq}
    run.status, run.current_step = RunStatus.RUNNING, steps[1].name
    run.audit_seq, run.audit_head = record.seq, record.hash
    event = RunEvent(run_id=run.pk, status_from=RunStatus.QUEUED, status_to=RunStatus.RUNNING,
                     created_at=record.created_at)
    return dict(run=run, steps=[steps[0]], records=[record], events=[event],
                run_fields=["status", "current_step", "audit_seq", "audit_head"],
                step_fields=["status", "remote_ref"], **expect)


def test_write_if_unchanged_writes_the_whole_transition_while_the_run_is_as_read():
    run = new_run()
    rows = _checkpoint(Run.objects.get(pk=run.pk), token=run.fencing_token)
    assert store.current().write_if_unchanged(**rows) is True
    run.refresh_from_db()
    assert (run.status, run.current_step, run.audit_seq) == (RunStatus.RUNNING, "classify", 2)
    assert (step(run, "fetch").status, step(run, "fetch").remote_ref) == ("succeeded", "R-1")
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    assert [r.action for r in records] == ["started", "succeeded"]
    assert verify_chain(records) is None
    assert RunEvent.objects.filter(run=run, status_to=RunStatus.RUNNING).count() == 1


@pytest.mark.parametrize("moved", ["fencing_token", "status", "audit_seq"])
def test_write_if_unchanged_writes_nothing_once_the_run_moved_on(moved):
    run = new_run()
    rows = _checkpoint(Run.objects.get(pk=run.pk), token=run.fencing_token)
    changed = {"fencing_token": run.fencing_token + 1, "status": RunStatus.ATTENTION,
               "audit_seq": run.audit_seq + 1}
    Run.objects.filter(pk=run.pk).update(**{moved: changed[moved]})
    assert store.current().write_if_unchanged(**rows) is False
    assert step(run, "fetch").status == StepStatus.PENDING
    assert _actions(run) == [("started", "")]
    assert not RunEvent.objects.filter(run=run, status_to=RunStatus.RUNNING).exists()


def test_a_locked_run_in_the_transaction_is_the_run_and_nothing_is_written_if_the_body_raises():
    run = new_run()
    db = store.current()
    with db.transaction():
        locked = db.lock_run(run.pk)
        assert locked.pk == run.pk and connection.in_atomic_block
    with pytest.raises(ZeroDivisionError), db.transaction():
        locked = db.lock_run(run.pk)
        Run.objects.filter(pk=locked.pk).update(status_message="half done")
        1 / 0  # noqa: B018
    assert Run.objects.get(pk=run.pk).status_message == ""
    with db.transaction():
        assert db.lock_run(run.pk + 10_000) is None


def test_the_transaction_is_durable_unless_joined_to_the_callers():
    db = store.current()
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):  # noqa: SIM117
        with db.transaction():
            pass
    with transaction.atomic(), db.transaction(durable=False):
        assert connection.in_atomic_block


def test_a_joined_write_is_done_once_inside_the_next_transition_transaction():
    db = store.current()
    run = new_run()
    done = []

    def write():
        assert connection.in_atomic_block  # inside the transition's transaction
        Run.objects.filter(pk=run.pk).update(status_message="joined")
        done.append(1)

    store.join_next_transaction("note", write)
    store.join_next_transaction("note", write)  # joined again before it ran: done once
    assert done == []  # nothing written of its own
    with db.transaction():
        pass
    with db.transaction():
        pass
    assert done == [1]
    assert Run.objects.get(pk=run.pk).status_message == "joined"


def test_a_joined_write_that_fails_leaves_the_transition_it_rode_along_with_whole():
    db = store.current()
    run = new_run()

    def broken():
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    store.join_next_transaction("broken", broken)
    with db.transaction():
        Run.objects.filter(pk=run.pk).update(status_message="the transition's own write")
    assert Run.objects.get(pk=run.pk).status_message == "the transition's own write"


def test_a_joined_write_taken_back_is_not_done():
    done = []
    store.join_next_transaction("beat", lambda: done.append(1))
    assert store.withdraw_joined("beat") is True
    assert store.withdraw_joined("beat") is False
    with store.current().transaction():
        pass
    assert done == []


def test_a_runs_listed_step_is_its_current_step_unless_a_worker_holds_it():
    """The database keeps listed_step (the runs list's order by step, runs 0035), whoever
    writes the run: it changes with the status, never with a held run's checkpoint."""
    run = new_run()
    assert Run.objects.get(pk=run.pk).listed_step == run.current_step
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, current_step="a-step")
    assert Run.objects.get(pk=run.pk).listed_step is None
    Run.objects.filter(pk=run.pk).update(current_step="b-step")  # a checkpoint
    assert Run.objects.get(pk=run.pk).listed_step is None
    Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING, current_step="c-step")
    assert Run.objects.get(pk=run.pk).listed_step == "c-step"
    Run.objects.filter(pk=run.pk).update(listed_step="forged")
    assert Run.objects.get(pk=run.pk).listed_step == "c-step"


def test_lock_runs_locks_and_returns_the_rows_in_the_order_given():
    runs = [new_run(), new_run()]
    with store.current().transaction():
        locked = store.current().lock_runs(
            Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("-pk"), skip_locked=True)
    assert [r.pk for r in locked] == sorted((r.pk for r in runs), reverse=True)


def test_runs_started_through_the_store_get_ids_no_other_run_has():
    ids = [new_run().pk for _ in range(3)]
    assert len(set(ids)) == 3
    reserved = store.current().next_run_id()
    assert reserved not in ids and not Run.objects.filter(pk=reserved).exists()


def test_a_start_makes_the_run_its_keyed_steps_and_one_chained_record_once():
    run, created = transitions.start_run(workflow="test-orders", business_key="inv-store",
                                         input={"order": "inv-store"}, actor=SYSTEM)
    again, created_again = transitions.start_run(
        workflow="test-orders", business_key="inv-store", input={"order": "inv-store"},
        actor=SYSTEM)
    assert (created, created_again) == (True, False) and again.pk == run.pk
    steps = _steps(run)
    assert [(s.name, s.status) for s in steps] == [
        ("fetch", "pending"), ("classify", "pending"), ("create-task", "pending"),
        ("post-ledger", "pending")]
    assert all(s.idempotency_key == step_key("test-orders", "inv-store", s.name, s.version)
               for s in steps)
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    assert [r.action for r in records] == ["started"] and verify_chain(records) is None
    run.refresh_from_db()
    assert (run.audit_seq, run.audit_head) == (1, records[0].hash)
    assert run.workflow.name == "test-orders"
    assert RunEvent.objects.filter(run=run).count() == 1
    with pytest.raises(BusinessKeyConflict):
        transitions.start_run(workflow="test-orders", business_key="inv-store",
                              input={"order": "other"}, actor=SYSTEM)


def test_now_is_the_databases_clock():
    assert abs(store.current().now() - timezone.now()) < timedelta(seconds=5)


def _held_elsewhere(job: str) -> bool:
    result = []

    def attempt():
        try:
            with store.current().pass_lock(job, lock_key(job)) as held:
                result.append(held)
        finally:
            connections.close_all()

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    return result[0]


@pytest.mark.django_db(transaction=True)
def test_a_pass_lock_is_held_by_one_pass_at_a_time():
    job = f"store-test-{timezone.now().timestamp()}"
    with store.current().pass_lock(job, lock_key(job)) as held:
        assert held is True
        assert _held_elsewhere(job) is False
    assert _held_elsewhere(job) is True


def test_executing_by_step_sums_each_attempt_from_its_start_to_its_record(script):
    script.plan["fetch"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    make_due(run)
    executor.advance_run(run.pk, worker="w1")
    expected = {}
    for name, data, at in (AuditRecord.objects.filter(run=run).exclude(step_name="")
                           .values_list("step_name", "data", "created_at")):
        if data and data.get("started_at"):
            began = datetime.fromisoformat(data["started_at"])
            expected[name] = expected.get(name, timedelta(0)) + at - began
    assert set(expected) == {"fetch", "classify", "create-task", "post-ledger"}
    # fetch: two attempts, each its own record carrying its start
    fetch_records = AuditRecord.objects.filter(run=run, step_name="fetch",
                                               data__started_at__isnull=False)
    assert fetch_records.count() == 2
    assert store.current().executing_by_step(run.pk) == expected


def test_a_snapshot_is_a_transaction_reads_run_in():
    run = new_run()
    with store.current().snapshot(fast_aggregates=True):
        assert connection.in_atomic_block
        assert Run.objects.filter(pk=run.pk).count() == 1


# --- the kernel on the store ------------------------------------------------------------

def test_a_run_completes_with_one_effect_per_write_and_a_chain_that_verifies(script):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.steps_done == 4 and run.lease_owner == "" and run.finished_at is not None
    assert len(script.effects) == 2
    assert step(run, "create-task").remote_ref == script.effects[
        step(run, "create-task").idempotency_key]
    assert verify_chain(list(AuditRecord.objects.filter(run=run).order_by("seq"))) is None
    assert list(RunEvent.objects.filter(run=run, step_name="").order_by("pk")
                .values_list("status_to", flat=True)) == ["queued", "running", "completed"]


def test_a_result_is_stored_as_json_writes_it_whatever_its_numbers_and_keys(script):
    # A checkpoint's rows travel to the database as JSON text: an integer past 64 bits, keys
    # that are numbers, a choice's text and a float written with an exponent are stored as
    # the json module writes them (a step's success: the one-statement checkpoint).
    script.plan["fetch"] = [{"big": 2 ** 70, "by_number": {1: "one", 2.5: "half"},
                             "status": StepStatus.RUNNING, "ratio": 1e16, "small": 1.5e-7}]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "fetch").result == {
        "big": 1180591620717411303424, "by_number": {"1": "one", "2.5": "half"},
        "status": "running", "ratio": 10000000000000000, "small": 1.5e-7}


def test_a_claim_is_taken_once_and_each_outcome_records_the_next_intent_in_its_row():
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease is not None and lease.work.name == "fetch"
    assert transitions.claim_run(run.pk, worker="w2") is None
    lease = transitions.record_outcome(lease, lease.work, Outcome(succeeded=True, value={}))
    assert lease.work.name == "classify"
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.fencing_token) == (RunStatus.RUNNING, "w1", 1)
    # The intent is the row (running, its attempt started); the outcome is the one record.
    assert [a for a, _ in _actions(run)] == ["started", "claimed", "succeeded"]
    classify = step(run, "classify")
    assert (classify.status, classify.attempt) == (StepStatus.RUNNING, 1)
    assert classify.attempt_started_at is not None


def test_an_unknown_outcome_is_settled_by_key_and_never_sent_again(script):
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    task = step(run, "create-task")
    assert task.remote_ref == script.effects[task.idempotency_key]
    assert [c[0] for c in script.calls].count("create-task") == 1
    assert script.reconcile_calls == [("create-task", task.idempotency_key)]
    actions = [a for a, name in _actions(run) if name == "create-task"]
    assert actions[0] == "outcome_unknown" and "reconciled" in actions


def test_a_transient_error_is_retried_when_due_with_the_same_key(script):
    script.plan["fetch"] = [TransientError("503")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    assert run.next_wake_at is not None and step(run, "fetch").status == StepStatus.SCHEDULED
    assert transitions.claim_run(run.pk, worker="w1",
                                 now=run.next_wake_at - timedelta(seconds=1)) is None
    make_due(run)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    fetches = [c for c in script.calls if c[0] == "fetch"]
    assert [attempt for _, _, attempt in fetches] == [1, 2] and fetches[0][1] == fetches[1][1]


def test_a_taken_back_lease_records_a_late_result_and_changes_nothing():
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="w1")
    assert transitions.expire_leases([run.pk], now=timezone.now() + timedelta(hours=1)) == [
        run.pk]
    transitions.record_outcome(lease, lease.work, Outcome(succeeded=True, value={"x": 1}))
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and step(run, "fetch").status == StepStatus.PENDING
    assert [a for a, _ in _actions(run)][-2:] == ["lease_expired", "late_result"]


def test_an_operator_transition_locks_the_run_and_refuses_what_the_table_does_not_allow():
    run = new_run()
    transitions.terminate(run.pk, actor=Actor.system("ops"), reason="stop it")
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED and run.finished_at is not None
    with pytest.raises(TransitionNotAllowed):
        transitions.terminate(run.pk, actor=Actor.system("ops"), reason="again")
    with pytest.raises(TransitionNotAllowed, match="does not exist"):
        transitions.terminate(run.pk + 10_000, actor=Actor.system("ops"), reason="none")
