"""A command's count (a page's limit, an archive pass's batch or retention) is read as every
number given from outside is read (runs.machine.storable.whole_number): argparse's int read
"٥" as 5 and took "-5" as a number. And run_history pages its history as GET
/api/runs/{id}/history does (at most 200 records), as list_runs pages runs as GET /api/runs."""

import io

import pytest
from django.core.management import CommandError, call_command

from api.tokens import token_create
from archive.models import ArchivedRun
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db

COUNTS = [("list_runs", "--limit"), ("run_history", "--limit"),
          ("archive_runs", "--batch"), ("archive_runs", "--older-than-days")]


@pytest.mark.parametrize("command, option", COUNTS)
@pytest.mark.parametrize("given", ["٥", "۵", "²", "-٥", "5.0", " 5", ""])
def test_a_count_not_written_in_digits_0_9_is_refused_naming_the_option(command, option,
                                                                         given):
    run = new_run(wake=False)
    out = io.StringIO()
    before = (Run.objects.count(), ArchivedRun.objects.count())
    args = [str(run.pk)] if command == "run_history" else []
    with pytest.raises(CommandError, match=f"argument {option}: must be a whole number "
                                           "written in digits 0-9"):
        call_command(command, *args, option, given, stdout=out)
    assert out.getvalue() == ""
    assert (Run.objects.count(), ArchivedRun.objects.count()) == before


@pytest.mark.parametrize("command, option", COUNTS)
def test_a_count_longer_than_any_number_is_refused_in_one_line(command, option):
    run = new_run(wake=False)
    args = [str(run.pk)] if command == "run_history" else []
    with pytest.raises(CommandError, match=f"argument {option}: has more than 4300 digits"):
        call_command(command, *args, option, "9" * 5000, stdout=io.StringIO())


def test_run_history_allows_the_most_records_a_page_the_api_does(client):
    run = new_run(wake=False)
    _, plaintext = token_create(name="t", workflows=["test-orders"])
    history = f"/api/runs/{run.pk}/history"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    assert client.get(history, {"limit": 200}, **auth).status_code == 200
    assert client.get(history, {"limit": 201}, **auth).status_code == 422
    out = io.StringIO()
    call_command("run_history", str(run.pk), "--limit", "200", stdout=out)
    assert "started" in out.getvalue()
    out = io.StringIO()
    with pytest.raises(CommandError, match="^--limit must be a whole number from 1 to 200, "
                                           "not 201; page on with --before$"):
        call_command("run_history", str(run.pk), "--limit", "201", stdout=out)
    assert out.getvalue() == ""
