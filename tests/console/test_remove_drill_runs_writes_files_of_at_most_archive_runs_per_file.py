"""remove_drill_runs bounds its archive files as an archiving pass does: at most
ARCHIVE_RUNS_PER_FILE runs in each (one file of every drill run would be read whole into
memory, however many a drill left), each file recorded and its runs removed before the next
is written. The output names every file."""

import gzip
import io
import json

import pytest
from django.core.management import call_command

from archive.models import ArchivedRun, ArchiveFile
from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

INVOICE = {"tenant": "tenant-42", "invoice_number": "INV-1", "approver_email": "a@example.com"}


def test_five_drill_runs_at_two_a_file_go_to_three_files(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.ARCHIVE_RUNS_PER_FILE = 2
    runs = [start_run(workflow="invoice-approval", business_key=f"drill:{n}", input=INVOICE,
                      actor=Actor.system("test"), wake=False, drill=True)[0]
            for n in range(5)]
    out = io.StringIO()

    call_command("remove_drill_runs", stdout=out)

    files = list(ArchiveFile.objects.order_by("pk"))
    assert [f.run_count for f in files] == [2, 2, 1]
    assert out.getvalue() == ("5 drill run(s) removed, archived in "
                              + ", ".join(repr(f.name) for f in files) + "\n")
    assert not Run.objects.filter(drill=True).exists()
    archived = dict(ArchivedRun.objects.values_list("original_run_id", "archive_file__name"))
    assert sorted(archived) == sorted(run.pk for run in runs)
    for archive in files:
        with gzip.open(tmp_path / "archive" / archive.name, "rt") as lines:
            header = json.loads(next(lines))["archive"]
        assert header["runs"] == archive.run_count
        assert sum(name == archive.name for name in archived.values()) == archive.run_count
    assert all(f.removal_finished_at is not None for f in files)
