"""seed_scale refuses a count of runs it cannot mean (none, fewer than none, more than ten
times the scale the console is measured at) before it writes anything: never a statement
that would run for hours, nor "already seeded" for a count of zero."""

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("runs", ["0", "-1", "10000001", "99999999999999999999"])
def test_a_count_out_of_range_is_refused_and_nothing_is_written(runs):
    with pytest.raises(CommandError, match="^--runs must be between 1 and 10000000"):
        call_command("seed_scale", "--runs", runs)
    assert not Run.objects.exists()


def test_a_count_in_range_is_seeded(capsys):
    call_command("seed_scale", "--runs", "3")
    assert Run.objects.filter(business_key__startswith="scale:").count() == 3
