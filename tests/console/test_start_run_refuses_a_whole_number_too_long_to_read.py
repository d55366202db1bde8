"""start_run --input holding a whole number of more digits than Python reads (4,300 by
default: sys.get_int_max_str_digits) is refused in one line naming --input, and starts
nothing: it ended the command in a ValueError traceback from deep inside the JSON reader.
(The API's 400 for such a body: tests/api/test_a_body_that_is_not_json_is_400_saying_what_is_
wrong.py.)"""

import io
import sys

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db

LIMIT = sys.get_int_max_str_digits()


@pytest.mark.parametrize("number", ["1" * (LIMIT + 1), "-" + "9" * (LIMIT + 700)])
def test_a_whole_number_too_long_is_refused_naming_input_and_starts_nothing(number):
    runs, records = Run.objects.count(), AuditRecord.objects.count()
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("start_run", "test-orders", "k-1", "--input",
                     f'{{"order": "o-1", "amount": {number}}}', stdout=out)
    message = str(refused.value)
    assert message.startswith("--input holds a whole number of "
                              f"{len(number.lstrip('-')):,} digits")
    assert message.endswith("nothing was started") and "\n" not in message
    assert out.getvalue() == ""
    assert Run.objects.count() == runs and AuditRecord.objects.count() == records


def test_a_whole_number_of_as_many_digits_as_python_reads_starts_the_run():
    out = io.StringIO()
    call_command("start_run", "test-orders", "k-1", "--input",
                 f'{{"order": "o-1", "note": [{"7" * LIMIT}]}}', stdout=out)
    assert out.getvalue().startswith("started run ")

