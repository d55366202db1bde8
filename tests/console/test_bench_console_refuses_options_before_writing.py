"""bench_console refuses runs too few for what it times, or a --repeat below 1, before it
writes anything: with --runs 3000 it ended in IndexError after it had made users, audit
records and worker rows."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from console.management.commands.bench_console import BULK_RUNS, MOST_REPEAT
from runs.management.commands.seed_scale import MOST_RUNS
from runs.models import Run, Worker

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("args", "refusal"), [
    (["--runs", "3000", "--repeat", "1"],
     f"^--runs must be a whole number from {BULK_RUNS} to {MOST_RUNS}, not 3000; "),
    (["--runs", "-5"], f"^--runs must be a whole number from {BULK_RUNS} to {MOST_RUNS}, "
                       "not -5; "),
    (["--runs", str(BULK_RUNS), "--repeat", "-1"],
     f"^--repeat must be a whole number from 1 to {MOST_REPEAT}, not -1; "),
    (["--runs", str(BULK_RUNS), "--repeat", "0"],
     f"^--repeat must be a whole number from 1 to {MOST_REPEAT}, not 0; "),
])
def test_an_option_it_cannot_bench_with_is_refused_before_anything_is_written(args, refusal):
    before = (User.objects.count(), Run.objects.count(), Worker.objects.count(),
              AuditRecord.objects.count())
    with pytest.raises(CommandError, match=refusal):
        call_command("bench_console", *args, stdout=io.StringIO())
    assert (User.objects.count(), Run.objects.count(), Worker.objects.count(),
            AuditRecord.objects.count()) == before
