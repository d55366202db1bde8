"""archive_runs (and remove_drill_runs, which records its actor the same way) run from a
container whose user id has no passwd entry and no USER variable (an arbitrary uid, as
OpenShift and many Kubernetes set-ups give): the pass is recorded under the user id, never
stopped by a traceback before anything is archived."""

import io
import os
import pwd
import socket

import pytest
from django.core.management import call_command

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def nameless_user(monkeypatch):
    """The process's user as such a container has it: no name in the environment, and none
    in the passwd database (what CPython raises then)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)


def test_a_pass_by_a_user_without_a_name_is_recorded_under_its_user_id(finished_run,
                                                                       nameless_user):
    run = finished_run(days=40)
    out = io.StringIO()

    call_command("archive_runs", stdout=out)

    assert "archived 1 runs in 1 files" in out.getvalue()
    assert not Run.objects.filter(pk=run.pk).exists()
    assert ArchivedRun.objects.filter(original_run_id=run.pk).exists()
    who = f"archive_runs command (uid {os.getuid()}@{socket.gethostname()})"
    assert ArchiveFile.objects.get().created_by == who
    assert ArchiveRemoval.objects.get().actor == who

