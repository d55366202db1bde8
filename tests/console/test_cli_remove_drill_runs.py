"""remove_drill_runs removes every drill run, or says which it kept and fails: a drill run
its termination leaves open (an effect not settled) is named on the first pass, not left
behind unnamed under "removed", and an archive storage that refuses the file is named
without a traceback."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchiveFile
from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus
from tests.factories import place

pytestmark = pytest.mark.django_db(transaction=True)

INVOICE = {"tenant": "tenant-42", "invoice_number": "INV-1", "approver_email": "a@example.com"}


def drill_run(key: str) -> Run:
    run, _ = start_run(workflow="invoice-approval", business_key=f"drill:{key}",
                       input=INVOICE, actor=Actor.system("test"), wake=False, drill=True)
    return run


@pytest.fixture
def archive_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path / "archive"


def test_a_drill_run_left_open_by_its_termination_is_named_and_the_command_fails(
        archive_dir):
    clean = drill_run("clean")
    unsettled = place(drill_run("unsettled"), status=RunStatus.ATTENTION,
                      attention_reason="unknown_outcome",
                      step_statuses={"read-invoice": "succeeded", "classify": "succeeded",
                                     "create-approval-task": "unknown"})
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"^1 drill run\(s\) kept \(named above\)"):
        call_command("remove_drill_runs", stdout=out)
    assert out.getvalue().startswith("1 drill run(s) removed, archived in ")
    assert f"kept: run {unsettled.pk} (drill:unsettled, attention): " in out.getvalue()
    assert "create-approval-task" in out.getvalue()
    assert not Run.objects.filter(pk=clean.pk).exists()
    assert Run.objects.get(pk=unsettled.pk).status == RunStatus.ATTENTION


def test_with_every_drill_run_removed_it_succeeds_and_names_no_kept_run(archive_dir):
    run = drill_run("clean")
    out = io.StringIO()
    call_command("remove_drill_runs", stdout=out)
    assert "kept" not in out.getvalue()
    assert not Run.objects.filter(pk=run.pk).exists()


def test_an_archive_storage_that_refuses_the_file_is_named_without_a_traceback(settings,
                                                                              tmp_path):
    run = drill_run("blocked")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the archive folder should be")
    settings.VAR_DIR = blocked  # the archive folder would be under a file
    out = io.StringIO()
    with pytest.raises(CommandError, match="^the archive storage refused the drill runs' "
                                           "file: .*Not a directory.*No drill run was "
                                           "removed"):
        call_command("remove_drill_runs", stdout=out)
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()
    assert "removed" not in out.getvalue()
