"""manage.py dispatch resume|pause and manage.py schedules pause on a row another session
holds (a psql prompt left idle in its transaction: the workflow's pause row, the pause
another session is making, the schedule's row) waited without end: the person at the
prompt got no answer for as long as the row was held. Now each waits DB_LOCK_TIMEOUT at
most, as run_action does, and ends in one line saying the database would not wait, exit
status 1, nothing changed or recorded; run again once the row is free, it is done once (real
processes; the other session is a real one)."""

import subprocess

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from audit.chain import Actor
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState
from runs.waiting import schedules
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def olga(operator, settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    dispatch.forget_cache()
    yield operator
    dispatch.forget_cache()


def holding(statement: str, params: list) -> psycopg.Connection:
    """Another session that runs `statement` and stays idle in its transaction."""
    db = connection.settings_dict
    holder = psycopg.connect(dbname=db["NAME"], user=db["USER"] or None,
                             host=db["HOST"] or None, port=db["PORT"] or None)
    holder.execute(statement, params)
    return holder


def refused_while_held(holder: psycopg.Connection, *command: str) -> str:
    """Run manage.py `command` while `holder` holds its row; its one line."""
    try:
        process = manage(*command, DB_LOCK_TIMEOUT="1")
        try:
            # Without the bound the command waits here for as long as the row is held.
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise AssertionError(f"{command[0]} waited for the row another session "
                                 "holds") from None
        # Still held: the command ended while the other session kept the row.
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        holder.rollback()
        holder.close()
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def done(*command: str) -> str:
    process = manage(*command, DB_LOCK_TIMEOUT="1")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def test_dispatch_resume_of_a_pause_another_session_holds(olga):
    dispatch.pause_dispatch(workflow="test-orders", actor=Actor.for_user(olga), reason="INC-1")
    records = ControlRecord.objects.count()
    command = ("dispatch", "resume", "test-orders", "--user", "olga", "--reason", "INC-1 over")
    holder = holding(f"SELECT * FROM {DispatchPause._meta.db_table} WHERE workflow_name = %s "
                     "FOR UPDATE", ["test-orders"])

    line = refused_while_held(holder, *command)

    assert line.startswith("manage.py dispatch: the database would not wait ("), line
    assert dispatch.pause_in_force("test-orders")
    assert ControlRecord.objects.count() == records

    assert done(*command).strip() == "test-orders: resumed"
    assert not DispatchPause.objects.exists()
    assert ControlRecord.objects.filter(action="dispatch_resumed").count() == 1


def test_dispatch_pause_another_session_is_making(olga):
    command = ("dispatch", "pause", "test-orders", "--user", "olga", "--reason", "INC-2")
    # The same pause inserted by another session, not yet committed: the command's insert
    # waits to see whether it commits.
    holder = holding(f"INSERT INTO {DispatchPause._meta.db_table} (workflow_name, system, "
                     "reason, paused_by, paused_at) VALUES (%s, '', 'psql', 'psql', now())",
                     ["test-orders"])

    line = refused_while_held(holder, *command)

    assert line.startswith("manage.py dispatch: the database would not wait ("), line
    assert not DispatchPause.objects.exists()
    assert not ControlRecord.objects.exists()

    assert done(*command).strip() == "test-orders: paused"
    assert DispatchPause.objects.get().paused_by == "olga"
    assert ControlRecord.objects.filter(action="dispatch_paused").count() == 1


def test_schedules_pause_of_a_schedule_another_session_holds(olga):
    schedule = schedules.registry.get("test-scheduled", "every-minute")
    state = schedules.state_of(schedule, now=timezone.now())
    command = ("schedules", "pause", "test-scheduled", "every-minute", "--user", "olga",
               "--reason", "INC-3")
    holder = holding(f"SELECT * FROM {ScheduleState._meta.db_table} WHERE id = %s FOR UPDATE",
                     [state.pk])

    line = refused_while_held(holder, *command)

    assert line.startswith("manage.py schedules: the database would not wait ("), line
    assert not ScheduleState.objects.get(pk=state.pk).paused
    assert not ControlRecord.objects.exists()

    assert done(*command).strip() == "schedule every-minute of test-scheduled: paused"
    assert ScheduleState.objects.get(pk=state.pk).paused
    assert ControlRecord.objects.filter(action="schedule_paused").count() == 1
