"""Beat writes a checkpoint of every audit chain's head into the checkpoint storage every
AUDIT_CHECKPOINT_INTERVAL_SECONDS (STORAGES "audit_checkpoints", else VAR_DIR/
audit-checkpoints), each under a new name that sorts by its time: `audit_checkpoint check
--latest` then tells a chain set back since the newest one, with no file to keep by hand."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit import checkpoints, tasks
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.audit.test_a_checkpoint_kept_outside_the_database_finds_a_chain_set_back import (
    set_back,
)
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def checkpoint_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items()
                         if k != "audit_checkpoints"}
    return tmp_path / "audit-checkpoints"


@pytest.fixture
def completed_run():
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return Run.objects.get(pk=run.pk)


def test_beat_schedules_the_checkpoint_and_workers_know_the_task():
    from console.celery import app

    app.finalize(auto=True)
    assert "audit.write_checkpoint" in app.tasks
    assert "audit.write_checkpoint" in [e["task"] for e in app.conf.beat_schedule.values()]


def test_each_checkpoint_is_a_new_file_and_the_latest_is_checked(completed_run,
                                                                 checkpoint_dir, capsys):
    first = tasks.write_checkpoint()
    second = tasks.write_checkpoint()
    assert first["chains"] == second["chains"] == 1
    assert first["name"] != second["name"]
    assert sorted(p.name for p in checkpoint_dir.iterdir()) == sorted(
        [first["name"], second["name"]])
    assert checkpoints.latest_stored() == max(first["name"], second["name"])

    call_command("audit_checkpoint", "check", "--latest")
    assert "every one of the 1 chain(s)" in capsys.readouterr().out

    set_back(completed_run, to_seq=2)
    with pytest.raises(CommandError, match=f"run {completed_run.pk}: its chain no longer"):
        call_command("audit_checkpoint", "check", "--latest")
    # A stored checkpoint is named as the storage names it.
    with pytest.raises(CommandError, match="no longer hold their head"):
        call_command("audit_checkpoint", "check", first["name"])


def test_write_without_a_file_stores_one_and_check_without_any_says_so(completed_run,
                                                                        capsys):
    with pytest.raises(CommandError, match="no checkpoint is stored yet"):
        call_command("audit_checkpoint", "check", "--latest")
    with pytest.raises(CommandError, match="name the checkpoint file to check"):
        call_command("audit_checkpoint", "check")
    with pytest.raises(CommandError, match="--latest is for check, without a FILE"):
        call_command("audit_checkpoint", "write", "--latest")
    call_command("audit_checkpoint", "write")
    assert "in the checkpoint storage" in capsys.readouterr().out
    assert checkpoints.latest_stored() is not None
    with pytest.raises(CommandError, match="does not exist"):
        call_command("audit_checkpoint", "check", "../../etc/passwd.jsonl.gz")
