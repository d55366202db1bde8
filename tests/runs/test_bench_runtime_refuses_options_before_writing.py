"""bench_runtime refuses a --round-seconds out of its range (1 to 3600 seconds), nan and inf
among them, before it writes anything: nan passed the "<= 0" check and crashed after the
warm-up's runs."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.machine.storable import number_argument
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1"])
def test_a_round_seconds_not_finite_and_positive_is_refused(value):
    with pytest.raises(CommandError,
                       match="^--round-seconds must be a number from 1 to 3600, not "):
        call_command("bench_runtime", f"--round-seconds={value}", stdout=io.StringIO())
    assert not Run.objects.exists()


@pytest.mark.parametrize("value", ["١٠", "1_0", " 10", "10 ", "ten", "0x10", ""])
def test_a_round_seconds_not_written_in_ascii_digits_is_refused_naming_what_was_given(value):
    # float() reads "١٠" (Arabic-Indic digits), "1_0" and " 10" as 10: the bench ran.
    with pytest.raises(CommandError, match="^Error: argument --round-seconds: must be a number "
                                           "written in digits 0-9, not "):
        call_command("bench_runtime", f"--round-seconds={value}", stdout=io.StringIO())
    assert not Run.objects.exists()


@pytest.mark.parametrize(("value", "read"), [("10", 10.0), ("2.5", 2.5), (".5", 0.5),
                                             ("1e1", 10.0), ("+3", 3.0), ("NaN", None)])
def test_a_number_in_ascii_digits_is_read_as_written(value, read):
    number = number_argument(value)
    assert number == read if read is not None else number != number
