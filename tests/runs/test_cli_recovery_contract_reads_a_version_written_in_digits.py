"""recovery_contract --workflow-version reads a version as every command reads a number
(runs.machine.storable.whole_number_argument): digits 0-9 only. int() would read "١" as 1
and "0_1" as 1, and print the contract of a version nobody named."""

import io

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("written", ["١", "0_1", " 1"])
def test_a_version_not_written_in_digits_is_refused_and_no_contract_is_printed(written):
    out = io.StringIO()
    with pytest.raises(CommandError, match="argument --workflow-version: must be a whole "
                                           "number written in digits 0-9"):
        call_command("recovery_contract", "invoice-approval", "--workflow-version", written,
                     stdout=out)
    assert out.getvalue() == ""


def test_a_version_written_in_digits_prints_that_version_s_contract():
    out = io.StringIO()
    call_command("recovery_contract", "invoice-approval", "--workflow-version", "1", stdout=out)
    assert out.getvalue().startswith("invoice-approval v1\n")
