"""remove_drill_runs dates the archive file it writes by the database's clock, as every
archiving pass does (archive.archiving): run from a host whose clock runs twenty days ahead,
the file is not dated (nor filed under a day) twenty days after the removal it records."""

from datetime import timedelta

import pytest

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.chain import Actor
from runs.machine.transitions import start_run
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

DAY = 24 * 3600
INVOICE = {"tenant": "tenant-42", "invoice_number": "INV-1", "approver_email": "a@example.com"}


def test_a_drill_removal_on_a_host_twenty_days_ahead_dates_its_file_by_the_database(
        archive_dir):
    run, _ = start_run(workflow="invoice-approval", business_key="drill:clock", input=INVOICE,
                       actor=Actor.system("test"), wake=False, drill=True)

    process = manage("remove_drill_runs", RUNS_TEST_CLOCK_OFFSET_SECONDS=20 * DAY,
                     VAR_DIR=archive_dir.parent)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 0, err
    archive = ArchiveFile.objects.get()
    removed_at = ArchiveRemoval.objects.get(archive_file=archive).removed_at
    assert ArchivedRun.objects.get(original_run_id=run.pk).archive_file == archive
    # Both by the database's clock: written, then removed, a moment apart (not 20 days).
    assert abs(removed_at - archive.created_at) < timedelta(days=1)
    assert (archive_dir / archive.name).is_file()
