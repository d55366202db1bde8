"""list_runs --after refuses a cursor it never printed with a message, including one shaped
like a time that names no date."""

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("after", ["2026-99-99T00:00:00|1", "2026-02-30T00:00:00+00:00|1"])
def test_a_cursor_with_an_impossible_date_is_refused_with_a_message(after):
    with pytest.raises(CommandError, match="is not a cursor this command printed"):
        call_command("list_runs", "--after", after)
