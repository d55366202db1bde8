"""remove_drill_runs took every drill run in one command, whatever ARCHIVE_MAX_RUNS_PER_PASS
said: a drill of a million runs was one command of a thousand files. It now takes as many
as an archiving pass, says how many are left and fails, so that the person (or a script
reading the exit status) runs it again; the next takes the rest."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchivedRun, ArchiveFile
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_five_drill_runs_at_three_a_pass_are_removed_by_two_commands(settings):
    settings.ARCHIVE_MAX_RUNS_PER_PASS = 3
    settings.ARCHIVE_RUNS_PER_FILE = 2
    ids = [new_run(wake=False, drill=True).pk for _ in range(5)]
    out = io.StringIO()

    with pytest.raises(CommandError) as left:
        call_command("remove_drill_runs", stdout=out)

    assert str(left.value) == ("2 drill run(s) left, past the 3 removed at a time "
                               "(ARCHIVE_MAX_RUNS_PER_PASS): run remove_drill_runs again")
    assert out.getvalue().startswith("3 drill run(s) removed, archived in ")
    assert sorted(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids[:3]
    assert [f.run_count for f in ArchiveFile.objects.order_by("pk")] == [2, 1]
    assert sorted(Run.objects.filter(drill=True).values_list("pk", flat=True)) == ids[3:]

    call_command("remove_drill_runs", stdout=io.StringIO())

    assert sorted(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids
    assert not Run.objects.filter(drill=True).exists()
