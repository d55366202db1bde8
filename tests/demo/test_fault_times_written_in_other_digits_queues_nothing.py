"""manage.py fault --times takes a count written in digits 0-9: "٣" (Arabic-Indic three)
or "1_0" is no count a person wrote, and queues nothing, where int() would read them as 3
and 10 calls of an injected fault."""

import pytest
from django.core.management import CommandError, call_command

from demo.sandbox import faults
from demo.sandbox.models import Fault

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("times", ["٣", "1_0", " 2", "x"])
def test_a_count_not_in_ascii_digits_is_refused_and_nothing_is_queued(times):
    with pytest.raises(CommandError, match="--times: must be a whole number written in "
                                           "digits 0-9"):
        call_command("fault", "tracker.create", "unavailable", "--times", times)
    assert Fault.objects.count() == 0


def test_a_count_in_ascii_digits_is_queued():
    call_command("fault", "tracker.create", "unavailable", "--times", "3")
    assert list(Fault.objects.values_list("endpoint", "kind", "remaining")) == [
        ("tracker.create", "unavailable", 3)]


@pytest.mark.parametrize("times", ["٣", "²"])
def test_the_fault_form_and_its_json_refuse_them_too(times):
    # The sandbox's form and JSON door read the count with faults.parse_times.
    with pytest.raises(faults.FaultError, match="times must be a whole number"):
        faults.parse_times(times)
    assert faults.parse_times("3") == 3
