"""A person who presses Ctrl-C while a command works (here run_action, waiting for a run
another session holds) stops it with one line saying it was interrupted and that the
transaction under way was rolled back, exit status 130 (the shell's for an interrupt), no
traceback, and nothing of that transaction written. It ended in a KeyboardInterrupt
traceback (a real process and a real SIGINT; the other session is a real one)."""

import signal

import psycopg
import pytest
from django.db import connection

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def other_session() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                           host=params["HOST"] or None, port=params["PORT"] or None,
                           autocommit=False)


def a_session_waits_for_a_lock() -> bool:
    # Asked in a transaction of its own each time: a transaction sees one snapshot of
    # pg_stat_activity.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def test_ctrl_c_while_an_action_waits_says_so_and_does_nothing(operator, stuck_run,
                                                               settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    records = AuditRecord.objects.filter(run=stuck_run).count()
    holder = other_session()
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [stuck_run.pk])
        # It would wait ten minutes for the row: the interrupt comes first.
        command = manage("run_action", str(stuck_run.pk), "terminate", "--user", "olga",
                         "--reason", "stop it", DB_LOCK_TIMEOUT=600)
        wait_for(lambda: a_session_waits_for_a_lock() or command.poll() is not None,
                 timeout=60, what="the command waiting for the run's row")
        assert command.poll() is None, command.communicate()
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=60)
    finally:
        holder.rollback()
        holder.close()
    assert command.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("manage.py run_action: interrupted (Ctrl-C)")
    assert "rolled back" in lines[0]
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records
    assert not AuditRecord.objects.filter(actor_label="olga").exists()
