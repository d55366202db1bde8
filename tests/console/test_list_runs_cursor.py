"""list_runs --after refuses a cursor it never printed with a message, including one shaped
like a time that names no date."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("after", ["2026-99-99T00:00:00|1", "2026-02-30T00:00:00+00:00|1"])
def test_a_cursor_with_an_impossible_date_is_refused_with_a_message(after):
    with pytest.raises(CommandError, match="is not a cursor this command printed"):
        call_command("list_runs", "--after", after)


def test_the_runs_page_starts_over_at_a_cursor_that_names_no_date(client_for, operator):
    """A hand-edited link: the list starts over at its first page, as for any cursor it
    never handed out, rather than failing."""
    response = client_for(operator).get(reverse("console:runs"),
                                        {"after": '["2026-99-99T00:00:00", 1]'})
    assert response.status_code == 200
