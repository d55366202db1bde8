"""start_run --input is read as the API reads a start request: NaN, Infinity and -Infinity,
which Python's JSON reader takes, are not JSON, and a literal too large for a float (1e400)
is read as infinity; jsonb can store none of them. The command refuses them naming --input
and the number, and starts nothing."""

import io
import re

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("given", "constant"), [
    ('{"order": "o-1", "amount": NaN}', "NaN"),
    ('{"order": "o-1", "amount": Infinity}', "Infinity"),
    ('{"order": "o-1", "amount": -Infinity}', "-Infinity"),
    ('{"order": "o-1", "amount": 1e400}', "1e400"),
    ('{"order": "o-1", "amount": -1E+309}', "-1E+309"),
    # Where the input's model does not look (it drops what it does not name): only the
    # reading can refuse it.
    ('{"order": "o-1", "note": {"weights": [1, NaN]}}', "NaN"),
    ('{"order": "o-1", "note": [2.5e308]}', "2.5e308"),
])
def test_a_number_that_is_not_finite_is_refused_naming_input_and_starts_nothing(given, constant):
    runs, records = Run.objects.count(), AuditRecord.objects.count()
    out = io.StringIO()
    with pytest.raises(CommandError, match=rf"^--input holds {re.escape(constant)}, not a "
                                           "finite number .*; nothing was started$"):
        call_command("start_run", "test-orders", "k-1", "--input", given, stdout=out)
    assert out.getvalue() == ""
    assert Run.objects.count() == runs and AuditRecord.objects.count() == records
    assert not Run.objects.filter(business_key="k-1").exists()


def test_the_same_input_with_finite_numbers_starts_the_run():
    out = io.StringIO()
    call_command("start_run", "test-orders", "k-1", "--input",
                 '{"order": "o-1", "amount": 5, "note": [1.7976931348623157e308, -0.5]}',
                 stdout=out)
    assert out.getvalue().startswith("started run ")
    assert Run.objects.get(business_key="k-1").input["amount"] == 5
