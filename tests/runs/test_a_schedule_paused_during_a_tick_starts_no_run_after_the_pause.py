"""A pause of a schedule and a tick of it never interleave: a pause committed after the tick
read the schedule, or still being committed when the tick comes to start a run, lets no
run start; a pause that comes while a run is being started waits for that run, and the
slots after it start nothing. Real sessions and real locks (PostgreSQL)."""

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection, connections, transaction

from audit.chain import Actor
from runs.models import Run, ScheduleState
from runs.waiting import schedules
from runs.waiting.schedules import Schedule, fire_schedule
from tests.processes import wait_for
from tests.workflows import nightly

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
NEXT_SLOT = T0 + timedelta(minutes=1)
OPS = Actor.system("ops")


@pytest.fixture
def probe():
    """A schedule every minute, registered (a pause names it), seen once at T0."""
    made = Schedule(nightly, "probe", every=timedelta(minutes=1), register=False,
                    input=lambda slot: {"slot": slot.isoformat()})
    schedules.registry.add(made)
    fire_schedule(made, now=T0)
    yield made
    schedules.registry.remove(made)


def pause(reason: str = "receiver down") -> None:
    schedules.set_paused(workflow="test-scheduled", name="probe", paused=True, actor=OPS,
                         reason=reason, now=T0)


def scheduled_runs() -> list[str]:
    return list(Run.objects.filter(workflow_name="test-scheduled")
                .values_list("business_key", flat=True))


def in_thread(fn, out: list, pids: list | None = None) -> threading.Thread:
    """`fn` in a thread with its own database session; its backend's pid into `pids`."""
    def go():
        try:
            if pids is not None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    pids.append(cursor.fetchone()[0])
            out.append(fn())
        finally:
            connections.close_all()
    thread = threading.Thread(target=go)
    thread.start()
    return thread


def waits_on_a_lock(pids: list) -> bool:
    # Autocommit (a transactional test): each read of pg_stat_activity is a fresh view.
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", pids)
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def blocked_or_done(thread: threading.Thread, pids: list) -> bool:
    return bool(pids) and (not thread.is_alive() or waits_on_a_lock(pids))


def test_a_pause_committed_after_the_tick_read_the_schedule_lets_no_run_start(probe):
    paused = []

    def input_paused_meanwhile(slot):
        # The slot's input is asked for after the tick read the schedule (not paused) and
        # before its run is started: there a person's pause commits, in a session of its own.
        in_thread(pause, paused).join(60)
        return {"slot": slot.isoformat()}

    probe.input = input_paused_meanwhile
    report = fire_schedule(probe, now=NEXT_SLOT)

    assert paused == [None], "the pause did not commit"
    assert report.started == [] and report.found == [] and report.refused == []
    assert scheduled_runs() == []
    state = ScheduleState.objects.get(name="probe")
    assert state.paused and state.last_run_id is None


def test_a_tick_meeting_a_pause_not_yet_committed_waits_for_it_and_starts_nothing(probe):
    held, release, reports, pids = threading.Event(), threading.Event(), [], []

    def pause_held_open():
        # The pause's transaction stays open (its row locked, paused not yet visible to
        # others) until the tick has come to start its run.
        with transaction.atomic():
            pause()
            held.set()
            release.wait(60)

    pauser = in_thread(pause_held_open, [])
    try:
        assert held.wait(60)
        ticker = in_thread(lambda: fire_schedule(probe, now=NEXT_SLOT), reports, pids)
        wait_for(lambda: blocked_or_done(ticker, pids), what="the tick to start or to wait")
    finally:
        release.set()
        pauser.join(60)
    ticker.join(60)

    assert len(reports) == 1 and reports[0].started == [] and reports[0].found == []
    assert scheduled_runs() == []
    assert ScheduleState.objects.get(name="probe").paused


def test_a_pause_during_a_runs_start_waits_for_that_run_and_the_next_slot_starts_nothing(
        probe):
    reports, tick_pids, pause_pids, paused = [], [], [], []
    # Another session holds the run table so that a run's insert waits: the tick is then
    # inside the transaction that creates its run, past its check of the pause.
    settings = connection.settings_dict
    holder = psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432,
                             user=settings["USER"], password=settings["PASSWORD"] or None,
                             dbname=settings["NAME"])
    try:
        holder.execute(f"LOCK TABLE {Run._meta.db_table} IN SHARE MODE")
        ticker = in_thread(lambda: fire_schedule(probe, now=NEXT_SLOT), reports, tick_pids)
        wait_for(lambda: blocked_or_done(ticker, tick_pids), what="the tick to wait")
        pauser = in_thread(pause, paused, pause_pids)
        wait_for(lambda: blocked_or_done(pauser, pause_pids), what="the pause to end or wait")
        # The pause waits for the run being started: it cannot commit between that run's
        # check of the pause and its creation.
        assert pauser.is_alive() and waits_on_a_lock(pause_pids)
    finally:
        holder.commit()
        holder.close()
    ticker.join(60)
    pauser.join(60)

    assert paused == [None]
    assert len(reports) == 1 and len(reports[0].started) == 1
    assert scheduled_runs() == ["schedule:probe:2026-03-02T09:01:00Z"]
    # Paused after that run: the slots after it start nothing.
    assert fire_schedule(probe, now=NEXT_SLOT + timedelta(minutes=3)).started == []
    assert scheduled_runs() == ["schedule:probe:2026-03-02T09:01:00Z"]
