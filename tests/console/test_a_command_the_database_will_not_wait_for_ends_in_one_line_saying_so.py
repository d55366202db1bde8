"""A manage.py command whose statement the database would not wait for (a row another
session holds past lock_timeout, a statement_timeout, a cancel) ends with one line that says
so, exit status 1 and no traceback, and nothing of the interrupted transaction written; run
again once the other session lets go, it does its work once. It was told as a database that
cannot be reached ("check DATABASE_URL and that PostgreSQL is running"): Django's manage.py
closes every connection before the error reaches the outage rule, which then read the
closed session as an outage (real processes; the other session is a real one)."""

import io

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import child_env, manage

pytestmark = pytest.mark.django_db(transaction=True)


def other_session() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                           host=params["HOST"] or None, port=params["PORT"] or None)


def waiting_at_most_a_second(*args):
    """manage.py `args`, whose sessions wait a second at most for a lock."""
    url = child_env()["DATABASE_URL"] + "?options=-c%20lock_timeout%3D1000"
    process = manage(*args, DATABASE_URL=url)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def said_in_one_line(returncode: int, err: str, command: str) -> None:
    assert returncode == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"manage.py {command}: the database would not wait (")
    assert "lock timeout" in lines[0] and "run the command again" in lines[0]
    assert "cannot be reached" not in lines[0] and "DATABASE_URL" not in lines[0]


def test_an_action_on_a_run_another_session_holds_says_so_and_is_done_once_after(
        operator, stuck_run, settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    records = AuditRecord.objects.filter(run=stuck_run).count()
    command = ("run_action", "--user", "olga", "--reason", "stop it", str(stuck_run.pk),
               "terminate")
    holder = other_session()
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [stuck_run.pk])
        returncode, _, err = waiting_at_most_a_second(*command)
    finally:
        holder.rollback()
        holder.close()
    said_in_one_line(returncode, err, "run_action")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records

    returncode, _, err = waiting_at_most_a_second(*command)
    assert returncode == 0, err
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1
    call_command("verify_audit", stdout=io.StringIO())


def test_verify_audit_kept_from_the_audit_records_says_so_and_verifies_after(stuck_run):
    holder = other_session()
    try:
        holder.execute("LOCK TABLE audit_auditrecord IN ACCESS EXCLUSIVE MODE")
        returncode, _, err = waiting_at_most_a_second("verify_audit")
    finally:
        holder.rollback()
        holder.close()
    said_in_one_line(returncode, err, "verify_audit")
    returncode, out, err = waiting_at_most_a_second("verify_audit")
    assert returncode == 0, err
