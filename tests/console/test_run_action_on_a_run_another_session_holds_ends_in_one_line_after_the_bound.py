"""run_action on a run another session holds (left idle in its transaction) waited without
end: the person at the prompt got no answer for as long as the row was held. Now it waits
DB_LOCK_TIMEOUT at most and ends in one line saying the database would not wait, nothing
written; run again once the row is free, the action is taken once (a real process; the other
session is a real one)."""

import io
import subprocess

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_action_on_a_held_run_ends_in_one_line_and_acts_once_after(operator, stuck_run,
                                                                        settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    records = AuditRecord.objects.filter(run=stuck_run).count()
    command = ("run_action", "--user", "olga", "--reason", "stop it", str(stuck_run.pk),
               "terminate")
    params = connection.settings_dict
    holder = psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                             host=params["HOST"] or None, port=params["PORT"] or None)
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [stuck_run.pk])
        process = manage(*command, DB_LOCK_TIMEOUT="1")
        try:
            # Without the bound the command waits here for as long as the row is held.
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise AssertionError("run_action waited for the run another session holds") \
                from None
    finally:
        holder.rollback()
        holder.close()
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("manage.py run_action: the database would not wait (")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records

    process = manage(*command, DB_LOCK_TIMEOUT="1")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1
    call_command("verify_audit", stdout=io.StringIO())
