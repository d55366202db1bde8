"""A real scheduler SIGKILLed in the middle of a catch-up tick (slots 09:01 to 09:03 due): the
run of 09:01 committed, the one of 09:02 being created, no slot yet recorded as handled.
The next tick finds the run of 09:01 and starts 09:02 and 09:03: each slot has one run, none
is skipped, and the schedule's row moves on to 09:03."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run, ScheduleState
from tests.approvals.run_lock_order import session
from tests.factories import new_run
from tests.processes import manage, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
KEY = "schedule:every-minute:2026-03-02T09:0{}:00Z"


def tick(at: datetime):
    return manage("schedules", "tick", "--now", at.isoformat())


def finish(process) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def slot_runs() -> list[str]:
    return sorted(Run.objects.filter(business_key__startswith="schedule:every-minute:")
                  .values_list("business_key", flat=True))


def test_a_tick_killed_mid_catch_up_leaves_no_slot_started_twice_or_skipped():
    finish(tick(T0))  # first sight: the schedule goes on from 09:00
    template = new_run("test-scheduled", wake=False, slot="template")
    # Another session inserts the run of 09:02 and holds it uncommitted: the tick's own
    # insert of that slot waits on it, after the run of 09:01 is committed.
    columns = [f.column for f in Run._meta.concrete_fields if f.column != "id"]
    chosen = ", ".join("%s" if c == "business_key" else c for c in columns)
    blocker = session()
    blocker.execute(f"INSERT INTO {Run._meta.db_table} ({', '.join(columns)}) "
                    f"SELECT {chosen} FROM {Run._meta.db_table} WHERE id = %s",
                    [KEY.format(2), template.pk])
    scheduler = tick(T0 + timedelta(minutes=3))
    try:
        wait_for(lambda: waiting_on_locks() == 1 or scheduler.poll() is not None, timeout=60,
                 what="the tick to wait on the run of 09:02")
        assert scheduler.poll() is None, scheduler.communicate()
        assert slot_runs() == [KEY.format(1)]
        scheduler.kill()  # SIGKILL, in the middle of the tick
        scheduler.communicate()
    finally:
        blocker.rollback()
        blocker.close()
    assert scheduler.returncode == -9
    assert ScheduleState.objects.get(name="every-minute").last_slot_at == \
        datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    # The killed tick's session ends once its wait does, releasing the scheduler's lock.
    def next_tick() -> dict | None:
        report = finish(tick(T0 + timedelta(minutes=3)))
        return None if report.get("locked_out") else report

    report = wait_for(next_tick, timeout=60, interval=0.5, what="the next tick to run")
    assert len(report["started"]) == 2 and len(report["found"]) == 1
    assert slot_runs() == [KEY.format(1), KEY.format(2), KEY.format(3)]
    assert ScheduleState.objects.get(name="every-minute").last_slot_at == \
        datetime(2026, 3, 2, 9, 3, tzinfo=UTC)
