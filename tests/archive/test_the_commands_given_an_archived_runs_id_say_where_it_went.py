"""show_run, run_history and run_action given the id of a run archival removed from the hot
tables say that it was archived, in which file and how to read it, instead of "no run N": the
run existed, and its file holds it (the console shows it read only, verify_audit --archive
checks it). An id no run ever had is still "no run N"."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.archiving import archive_runs
from archive.models import ArchivedRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(finished_run, archive_dir):
    run = finished_run(days=40)
    assert archive_runs(actor="test").runs_removed == 1
    return ArchivedRun.objects.select_related("archive_file").get(original_run_id=run.pk)


@pytest.fixture
def operator(db, monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    return User.objects.create_superuser("olga", password="pw")


def said(*args) -> str:
    with pytest.raises(CommandError) as refused:
        call_command(*args)
    return str(refused.value)


def test_show_run_names_the_archive_file_of_an_archived_run(archived):
    message = said("show_run", str(archived.original_run_id))

    assert message.startswith(f"run {archived.original_run_id} ({archived.workflow_name} "
                              f"{archived.business_key}) finished completed and was archived "
                              f"to {archived.archive_file.name!r}")
    assert f"verify_audit --archive {archived.archive_file.name!r}" in message
    assert f"/runs/archived/{archived.original_run_id}/" in message


def test_run_history_names_the_archive_file_of_an_archived_run(archived):
    message = said("run_history", str(archived.original_run_id))

    assert f"was archived to {archived.archive_file.name!r}" in message


def test_run_action_names_the_archive_file_of_an_archived_run(archived, operator):
    run_id = str(archived.original_run_id)

    assert f"was archived to {archived.archive_file.name!r}" in said(
        "run_action", run_id, "--user", "olga")
    assert f"was archived to {archived.archive_file.name!r}" in said(
        "run_action", run_id, "resume", "--user", "olga", "--reason", "try it")


def test_an_id_no_run_ever_had_is_no_run(archived):
    assert said("show_run", "987654321") == "no run 987654321"
    assert said("run_history", "987654321") == "no run 987654321"


def test_run_action_names_no_archived_run_to_a_person_who_may_not_view_its_runs(archived,
                                                                               monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    User.objects.create_user("nobody-here", password="pw")
    run_id = str(archived.original_run_id)

    assert said("run_action", run_id, "--user", "nobody-here") == f"no run {run_id}"
    assert said("run_action", run_id, "resume", "--user", "nobody-here", "--reason",
                "try it") == f"no run {run_id}"
