"""remove_drill_runs takes the archiving pass's lock (archive.archiving.JOB), as archive_runs
does: while another pass or removal holds it, the command fails with a message saying so,
writes no archive file, terminates nothing and removes nothing (side by side, the same drill
runs would go to two files, or be removed while the other writes them). Once the lock is
free it removes them, and lets go of the lock when it is done."""

import io
import re

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from archive.archiving import JOB
from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine.single_pass import lock_key
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus
from tests.factories import place
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

INVOICE = {"tenant": "tenant-42", "invoice_number": "INV-1", "approver_email": "a@example.com"}
HELD = ("another archive pass or drill run removal is under way (it holds the archive lock); "
        "nothing was done")


def drill_run(key: str) -> Run:
    run, _ = start_run(workflow="invoice-approval", business_key=f"drill:{key}",
                       input=INVOICE, actor=Actor.system("test"), wake=False, drill=True)
    return run


@pytest.fixture
def archive_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path / "archive"


@pytest.fixture
def other_session():
    """A session of its own, as another worker's or command's pass would have."""
    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                            dbname=db["NAME"], autocommit=True)
    yield other
    other.close()


def drill_runs() -> tuple[Run, Run]:
    """One drill run still open, one finished: a removal would terminate the first and
    archive both."""
    done = place(drill_run("done"), status=RunStatus.COMPLETED, finished_at=timezone.now())
    return drill_run("open"), done


def nothing_done(runs: tuple[Run, ...], records: int, archive_dir) -> None:
    assert not ArchiveFile.objects.exists()
    assert not ArchivedRun.objects.exists() and not ArchiveRemoval.objects.exists()
    assert {run.pk: run.status for run in runs} == dict(
        Run.objects.filter(drill=True).values_list("pk", "status"))
    assert AuditRecord.objects.count() == records  # no termination recorded
    assert not archive_dir.exists() or not any(archive_dir.rglob("*.gz"))


def test_while_another_pass_holds_the_lock_the_removal_says_so_and_does_nothing(
        archive_dir, other_session):
    runs = drill_runs()
    records = AuditRecord.objects.count()
    other_session.execute("SELECT pg_advisory_lock(%s)", [lock_key(JOB)])

    out = io.StringIO()
    refusal = rf"^{re.escape(HELD)}\. Run remove_drill_runs again once it has finished$"
    with pytest.raises(CommandError, match=refusal):
        call_command("remove_drill_runs", stdout=out)

    assert out.getvalue() == ""
    nothing_done(runs, records, archive_dir)

    other_session.execute("SELECT pg_advisory_unlock(%s)", [lock_key(JOB)])
    call_command("remove_drill_runs", stdout=out)
    assert out.getvalue().startswith("2 drill run(s) removed, archived in 'runs/")
    assert not Run.objects.filter(drill=True).exists()
    assert ArchiveFile.objects.get().run_count == 2
    # The removal let go of the lock when it ended: the next pass may take it.
    assert other_session.execute("SELECT pg_try_advisory_lock(%s)",
                                 [lock_key(JOB)]).fetchone()[0]


def test_a_removal_started_as_a_process_beside_a_pass_ends_in_one_line(archive_dir,
                                                                        other_session):
    runs = drill_runs()
    records = AuditRecord.objects.count()
    other_session.execute("SELECT pg_advisory_lock(%s)", [lock_key(JOB)])

    process = manage("remove_drill_runs", VAR_DIR=archive_dir.parent)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 1, out + err
    assert "Traceback" not in err
    assert err.strip() == f"CommandError: {HELD}. Run remove_drill_runs again once it has " \
                          "finished"
    assert out == ""
    nothing_done(runs, records, archive_dir)
