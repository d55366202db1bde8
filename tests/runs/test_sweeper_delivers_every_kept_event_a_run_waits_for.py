"""The sweeper's pass over kept events (the backstop for an event and a wait that crossed,
or a worker lost between a run's wait and its look for the event kept for it) delivers
every kept event a waiting run can consume, however long ago it came and however many
are kept, in batches by id; events kept for no waiting run cost it one query on indexes
that hold only the kept rows and the waiting references. A kept row names the wait it is
for as the waiting step does (awaiting_ref, written with the row; filled in for the rows
written before the column, by the migration and, for a release still running while it
ran, by the pass)."""

import re
from datetime import timedelta
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.chain import Actor
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import ExternalEvent, PassPosition, Run, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.kept import KEPT_PASS_JOB, consume_kept_events, consume_kept_for_run
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PSP = Actor.system("payments")
PAID = {"amount": 120, "reference": "PSP-77"}


def _send(run, *, event_id="evt-1", received_at=None):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP, now=received_at)


def _kept_then_waiting(run) -> Run:
    """`run` reaches its wait after its event was kept, and nobody looked for the event
    since (the worker's look after the wait was lost)."""
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING
    return run


def _kept_for_no_run(n: int, *, batch: str = "") -> None:
    now = timezone.now()
    ExternalEvent.objects.bulk_create(
        ExternalEvent(workflow_name="test-payment-wait", source="psp",
                      event_id=f"stale-{batch}{i}",
                      event_name="payment.settled", correlation_key=f"no-such-run-{i}",
                      awaited_ref=transitions.awaiting_ref("payment.settled",
                                                           f"no-such-run-{i}"),
                      payload=PAID, received_at=now) for i in range(n))


def test_a_kept_event_older_than_an_hour_is_delivered_by_the_sweepers_pass(script):
    run = new_run("test-payment-wait")
    assert _send(run, received_at=timezone.now() - timedelta(hours=3)) == events.Receipt("kept")
    _kept_then_waiting(run)

    assert sweeper.sweep().events == 1
    assert step(run, "payment").result == PAID
    assert ExternalEvent.objects.get().consumed_run_id == run.pk
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_more_than_a_hundred_kept_events_are_each_delivered_by_the_sweepers_pass(script):
    _kept_for_no_run(120)  # kept first, lowest ids: they must not crowd the others out
    runs = [new_run("test-payment-wait") for _ in range(130)]
    for i, run in enumerate(runs):
        assert _send(run, event_id=f"evt-{i}") == events.Receipt("kept")
    for run in runs:
        _kept_then_waiting(run)

    assert sweeper.sweep().events == 130
    assert ExternalEvent.objects.filter(consumed_run_id__in=[r.pk for r in runs]).count() == 130
    assert all(step(run, "payment").status == StepStatus.SUCCEEDED for run in runs)
    assert ExternalEvent.objects.filter(consumed_at__isnull=True).count() == 120
    assert sweeper.sweep().events == 0


def test_a_kept_event_with_a_key_named_by_its_digest_is_delivered_by_the_sweepers_pass(
        script):
    # A key this long is named in the waiting step's reference by its sha256, which the
    # pass's query computes as hashlib does.
    run, _ = transitions.start_run(workflow="test-payment-wait", business_key="k" * 300,
                                   input={"order": "o-1"}, actor=PSP, wake=False)
    assert _send(run) == events.Receipt("kept")
    _kept_then_waiting(run)
    assert "sha256=" in step(run, "payment").remote_ref

    assert sweeper.sweep().events == 1
    assert step(run, "payment").result == PAID


def test_a_kept_event_names_the_wait_it_is_for_as_the_waiting_step_does(script):
    # One form, awaiting_ref's, written with the kept row: the pass compares it with the
    # step's reference and never rebuilds it.
    short, long_key = new_run("test-payment-wait"), "k" * 300
    assert _send(short) == events.Receipt("kept")
    long_run, _ = transitions.start_run(workflow="test-payment-wait", business_key=long_key,
                                        input={"order": "o-1"}, actor=PSP, wake=False)
    assert _send(long_run, event_id="evt-2") == events.Receipt("kept")
    for run in (short, long_run):
        _kept_then_waiting(run)
    refs = dict(ExternalEvent.objects.values_list("correlation_key", "awaited_ref"))
    assert refs == {short.business_key: step(short, "payment").remote_ref,
                    long_key: step(long_run, "payment").remote_ref}
    assert "sha256=" in refs[long_key] and long_key not in refs[long_key]


def test_events_kept_without_their_reference_are_given_it_and_delivered_by_the_pass(script):
    # The previous release keeps receiving events while the migration that added the column
    # runs: it writes kept rows without the reference, which the pass fills in.
    runs = [new_run("test-payment-wait") for _ in range(3)]
    for i, run in enumerate(runs):
        assert _send(run, event_id=f"evt-{i}") == events.Receipt("kept")
        _kept_then_waiting(run)
    ExternalEvent.objects.update(awaited_ref="")

    assert consume_kept_events(batch=2) == 2  # filled a batch, delivered those
    assert consume_kept_events(batch=2) == 1
    assert all(step(run, "payment").result == PAID for run in runs)
    assert not ExternalEvent.objects.filter(awaited_ref="").exists()


def test_the_migration_fills_the_reference_of_every_kept_event_written_before_it_in_batches(
        monkeypatch):
    migration = import_module("runs.migrations.0043_external_event_awaited_ref")
    _kept_for_no_run(5)
    ExternalEvent.objects.create(workflow_name="test-payment-wait", source="psp",
                                 event_id="long", event_name="payment.settled",
                                 correlation_key="k" * 300, payload=PAID,
                                 received_at=timezone.now())
    # Delivered before the migration: nothing looks it up by its reference again, and a
    # migration that rewrote every delivered event would be all cost.
    ExternalEvent.objects.create(workflow_name="test-payment-wait", source="psp",
                                 event_id="delivered", event_name="payment.settled",
                                 correlation_key="k1", payload=PAID,
                                 received_at=timezone.now(), consumed_at=timezone.now())
    ExternalEvent.objects.update(awaited_ref="")
    monkeypatch.setattr(migration, "BATCH", 2)

    with CaptureQueriesContext(connection) as ctx:
        migration.backfill(django_apps, SimpleNamespace(connection=connection))
    kept = ExternalEvent.objects.filter(consumed_at__isnull=True).order_by("pk")
    assert [e.awaited_ref for e in kept] == [
        transitions.awaiting_ref(e.event_name, e.correlation_key) for e in kept]
    assert ExternalEvent.objects.get(event_id="long").awaited_ref.startswith(
        "awaiting-event:payment.settled:sha256=")
    assert ExternalEvent.objects.get(event_id="delivered").awaited_ref == ""
    # Six kept rows, two a batch: three batches of a read and a write, and the read that
    # finds none left; no batch reads the whole table.
    updates = [q for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 3
    assert all("LIMIT 2" in q["sql"] for q in ctx.captured_queries
               if q["sql"].startswith("SELECT"))


# The indexes that hold the kept rows alone (their condition: neither consumed nor expired).
# The window's end may be read along either of the two that hold every kept row, by id or by
# keep time: on a small table their costs tie, and the planner's statistics choose.
KEPT_ROWS_INDEXES = ("external_event_kept_order_idx", "external_event_keep_until_idx",
                     "external_event_kept_ref_idx", "external_event_no_ref_idx")
WINDOW_INDEXES = ("external_event_kept_order_idx", "external_event_keep_until_idx")


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_externalevent, runs_step, runs_run")
        cursor.execute("SET enable_seqscan = off")  # tiny tables are cheapest to scan
        try:
            cursor.execute("EXPLAIN " + sql)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")


def test_with_nothing_to_deliver_the_pass_reads_only_indexes_of_the_kept_and_waiting_rows(
        script):
    _kept_for_no_run(150)
    waiting = _kept_then_waiting(new_run("test-payment-wait"))
    ExternalEvent.objects.create(workflow_name="test-payment-wait", source="psp",
                                 event_id="done", event_name="payment.settled",
                                 correlation_key="consumed", payload=PAID,
                                 received_at=timezone.now(), consumed_at=timezone.now())

    with CaptureQueriesContext(connection) as ctx:
        assert consume_kept_events() == 0
    # The kept rows without their reference (none), where its window of kept rows ends,
    # then the kept rows a step waits for in it (and the same again from the first row if
    # it started past it).
    reads = [q for q in ctx.captured_queries if "runs_externalevent" in q["sql"]
             and "passposition" not in q["sql"]]
    assert 3 <= len(reads) <= 5
    plans = [_plan(query["sql"]) for query in reads]
    assert "external_event_no_ref_idx" in plans[0], plans
    assert any(index in plans[1] for index in WINDOW_INDEXES), plans
    # The kept rows a step waits for: the window's kept rows each looked up among the
    # waiting references, or (the planner's choice) the waiting references each looked up
    # among the kept rows; either way along indexes that hold only those rows.
    assert all(any(index in plan for index in KEPT_ROWS_INDEXES) for plan in plans), plans
    assert not any("runs_externalevent_pkey" in plan for plan in plans), plans
    assert any("step_remote_ref_idx" in plan for plan in plans), plans
    assert not any(re.search(r"Seq Scan on runs_(externalevent|step)\b", plan)
                   for plan in plans), plans
    assert step(waiting, "payment").status == StepStatus.WAITING


def test_a_run_that_begins_to_wait_finds_its_kept_event_by_reference_along_an_index(script):
    _kept_for_no_run(150)
    run = new_run("test-payment-wait", wake=False)
    assert _send(run) == events.Receipt("kept")
    _kept_then_waiting(run)

    with CaptureQueriesContext(connection) as ctx:
        assert consume_kept_for_run(run.pk)
    (look,) = [q for q in ctx.captured_queries if q["sql"].startswith("SELECT")
               and 'FROM "runs_externalevent"' in q["sql"]]
    plan = _plan(look["sql"])
    assert "external_event_kept_ref_idx" in plan, plan
    assert not re.search(r"Seq Scan on runs_externalevent\b", plan), plan
    assert step(run, "payment").result == PAID


def test_a_pass_looks_at_a_bounded_window_of_kept_rows_and_the_next_passes_go_on_from_it(
        script):
    # A sender kept thousands of events no run waits for: a pass costs the same however
    # many, and the events that runs wait for are each delivered within a few passes.
    runs = [new_run("test-payment-wait") for _ in range(3)]
    for i, run in enumerate(runs):
        _kept_for_no_run(40, batch=f"{i}-")
        assert _send(run, event_id=f"evt-{i}") == events.Receipt("kept")
    for run in runs:
        _kept_then_waiting(run)

    delivered = []
    for _ in range(6):  # 123 kept rows, 30 a pass: every row within five passes
        with CaptureQueriesContext(connection) as ctx:
            delivered.append(consume_kept_events(rows=30))
        assert len(ctx.captured_queries) <= 7 + delivered[-1] * 20
        # Where it stopped is in the database: the next pass goes on from there in any
        # worker process, and after a restart.
        position = PassPosition.objects.get(job=KEPT_PASS_JOB).after_id
        assert position == 0 or ExternalEvent.objects.filter(pk=position).exists()
    assert sum(delivered) == 3
    assert max(delivered) == 1  # one each pass that reached it, not all in the first
    assert all(step(run, "payment").result == PAID for run in runs)
    assert ExternalEvent.objects.filter(consumed_at__isnull=True).count() == 120
