"""bench_runtime refuses a --round-seconds out of its range (1 to 3600 seconds), nan and inf
among them, before it writes anything: nan passed the "<= 0" check and crashed after the
warm-up's runs."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1"])
def test_a_round_seconds_not_finite_and_positive_is_refused(value):
    with pytest.raises(CommandError,
                       match="^--round-seconds must be a number from 1 to 3600, not "):
        call_command("bench_runtime", f"--round-seconds={value}", stdout=io.StringIO())
    assert not Run.objects.exists()
