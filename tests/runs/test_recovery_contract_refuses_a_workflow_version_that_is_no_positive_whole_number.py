"""recovery_contract --workflow-version takes what a workflow may declare as its version: a
whole number from 1 up, written in digits 0-9. Anything else (-1, 0, a number past what a
version column holds, text that is no number) is refused naming the option, before any
workflow is looked up: -1 was looked up and answered "unknown workflow ... v-1", as if a
version had gone missing, and 0 is not read as "the latest" either. The range is said as
every command says a count out of its range (runs.machine.storable.whole_number_in_range):
"--workflow-version must be a whole number from 1 to 2147483647, not 0"."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.definitions.validation import VERSION_MAX


def refusal(written: str) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("recovery_contract", "invoice-approval", "--workflow-version", written,
                     stdout=out)
    assert out.getvalue() == ""  # no contract printed, of the latest or any version
    return str(refused.value)


@pytest.mark.parametrize(("written", "said"), [
    ("-1", "-1"), ("0", "0"), ("-0", "0"), ("00", "0"), ("2147483648", "2147483648"),
    # A long number is not repeated whole.
    ("-" + "9" * 60, "-" + "9" * 39 + "... (60 digits)")])
def test_a_version_that_is_no_positive_whole_number_is_refused_naming_the_option(written,
                                                                               said):
    assert refusal(written) == (f"--workflow-version must be a whole number from 1 to "
                                f"{VERSION_MAX}, not {said}; leave it out for the latest "
                                "version")


@pytest.mark.parametrize("written", ["x", "1.5", "+1", "١", ""])
def test_a_version_not_written_in_digits_is_refused_naming_the_option(written):
    message = refusal(written)

    assert "argument --workflow-version: must be a whole number written in digits 0-9" \
        in message
    assert "unknown workflow" not in message


def test_version_1_is_still_that_versions_contract():
    out = io.StringIO()
    call_command("recovery_contract", "invoice-approval", "--workflow-version", "1", stdout=out)
    assert out.getvalue().startswith("invoice-approval v1\n")
