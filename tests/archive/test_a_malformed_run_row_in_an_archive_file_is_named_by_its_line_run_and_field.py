"""A run's row in an archive file that no archive writes (a field edited to a value of
another kind, an item of a part that is not an object) is named where it is: the file, the
line and the run, and the field that is wrong. verify_audit --archive says so in its one
line and exits non-zero without a traceback, and goes on to judge the file's other runs;
the console's page of the archived run says the same instead of "cannot be read" with the
error of whatever code met the value first."""

import gzip
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from archive.archiving import archive_runs
from archive.models import ArchiveFile
from tests.processes import manage

pytestmark = pytest.mark.django_db


def _time_not_iso(line):
    line["audit"][0]["created_at"] = "yesterday"
    return ("audit record 1 (seq 1): field 'created_at' is \"yesterday\", not a time in "
            "ISO 8601 form")


def _head_not_text(line):
    line["run"]["audit_head"] = 5
    return "field 'run.audit_head' is 5, not text"


def _step_not_an_object(line):
    line["steps"][0] = "done"
    return "item 1 of field 'steps' is a JSON string, not an object"


@pytest.fixture(params=[_time_not_iso, _head_not_text, _step_not_an_object],
                ids=["a-records-time", "the-runs-head", "a-step"])
def malformed(request, finished_run, archive_dir):
    """Two runs archived to one real file, the second run's row edited in place (the file
    still gzip and JSON throughout): (the run, its line number, the file, what is wrong)."""
    kept, edited = finished_run(days=40), finished_run(days=40)
    assert archive_runs(actor="test").runs_removed == 2
    path = archive_dir / ArchiveFile.objects.get().name
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(line) for line in handle]
    number = next(n for n, line in enumerate(lines, start=1)
                  if line.get("run", {}).get("id") == edited.pk)
    wrong = request.param(lines[number - 1])
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    return kept, edited, number, path, wrong


def test_verify_audit_names_the_line_the_run_and_the_field(malformed):
    kept, run, number, path, wrong = malformed

    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", str(path))

    message = str(failed.value)
    assert message.startswith(f"archive '{path}': ")
    assert (f"line {number} (run {run.pk}): its row is not one an archive writes: {wrong}"
            in message)
    assert "cannot be read" not in message and "\n" not in message
    assert "missing" not in message  # it is in the file, and its row is named
    # The edit is seen by the run's seal too; the other run of the file is judged and passes.
    assert f"run {run.pk}: " in message and f"run {kept.pk}" not in message


def test_the_command_exits_non_zero_in_one_line_without_a_traceback(malformed):
    _kept, run, number, path, wrong = malformed

    command = manage("verify_audit", "--archive", str(path))
    out, err = command.communicate(timeout=120)

    assert command.returncode != 0, out
    assert "Traceback" not in err
    assert f"line {number} (run {run.pk}): its row is not one an archive writes: {wrong}" in err
    assert "verified archive" not in out


def test_the_archived_runs_page_names_the_line_the_run_and_the_field(malformed, client):
    kept, run, number, path, wrong = malformed
    client.force_login(User.objects.create_superuser("ada", password="pw"))

    page = client.get(reverse("console:archived_run", args=[run.pk]))

    assert page.status_code == 200
    assert page.context["detail"] is None
    name = ArchiveFile.objects.get().name
    assert page.context["problem"] == (
        f"archive file {name!r}, line {number}: the row of run {run.pk} is not one an archive "
        f"writes: {wrong}")
    # The other run of the file reads as it was written.
    other = client.get(reverse("console:archived_run", args=[kept.pk]))
    assert other.context["problem"] == "" and other.context["detail"].run["id"] == kept.pk
