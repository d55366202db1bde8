"""seed_scale refuses a count of runs it cannot mean (none, fewer than none, more than ten
times the scale the console is measured at) before it writes anything: never a statement
that would run for hours, nor "already seeded" for a count of zero."""

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run
from tests.processes import manage

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("runs", ["0", "-1", "10000001", "99999999999999999999"])
def test_a_count_out_of_range_is_refused_and_nothing_is_written(runs):
    with pytest.raises(CommandError, match=f"^--runs must be a whole number from 1 to 10000000, "
                                           f"not {int(runs)}; .*nothing was done$"):
        call_command("seed_scale", "--runs", runs)
    assert not Run.objects.exists()


def test_a_count_in_range_is_seeded(capsys):
    call_command("seed_scale", "--runs", "3")
    assert Run.objects.filter(business_key__startswith="scale:").count() == 3


@pytest.mark.django_db(transaction=True)
def test_two_seeders_at_once_seed_the_count_once_and_neither_fails():
    # The second waits for the first (one lock for the count and the inserts), then finds
    # its runs; before, both counted none and one died on a duplicate business key.
    seeders = [manage("seed_scale", "--runs", "2000") for _ in range(2)]
    outputs = [seeder.communicate(timeout=120) for seeder in seeders]
    assert [seeder.returncode for seeder in seeders] == [0, 0], outputs
    assert sorted(out.strip() for out, _ in outputs) == [
        "already seeded: 2000 runs", "seeded 2000 runs and 20000 steps"]
    assert Run.objects.filter(workflow_name="bench-noop-10",
                              business_key__startswith="scale:").count() == 2000


def test_runs_of_another_workflow_with_a_scale_key_are_not_counted_as_seeded(capsys):
    call_command("seed_scale", "--runs", "2")
    Run.objects.filter(business_key="scale:2").update(workflow_name="another")
    call_command("seed_scale", "--runs", "2")
    assert capsys.readouterr().out.splitlines()[-1] == "seeded 1 runs and 10 steps"
