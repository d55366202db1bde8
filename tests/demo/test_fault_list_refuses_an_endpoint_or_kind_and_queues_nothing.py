"""manage.py fault --list only lists: an endpoint or a kind given beside it is refused, as
--clear refuses them, and no fault is queued. Queued unseen, it would hit the next call of
an operator who only meant to look."""

import io

import pytest
from django.core.management import CommandError, call_command

from demo.sandbox import faults

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("given", [
    ("tracker.create", "commit_then_timeout"),
    ("tracker.create",),
    ("ledger.post", "unavailable", "--times", "3"),
])
def test_an_endpoint_or_kind_beside_list_is_refused_and_nothing_is_queued(given):
    out = io.StringIO()
    with pytest.raises(CommandError, match="^--list takes no endpoint or kind$"):
        call_command("fault", *given, "--list", stdout=out)
    assert len(faults.pending()) == 0
    assert out.getvalue() == ""


def test_list_alone_lists_what_was_queued():
    call_command("fault", "tracker.create", "commit_then_timeout", stdout=io.StringIO())
    out = io.StringIO()
    call_command("fault", "--list", stdout=out)
    assert out.getvalue().startswith("tracker.create\tcommit_then_timeout\tx1\t")
    assert len(faults.pending()) == 1


@pytest.mark.parametrize("flag", ["--list", "--clear"])
def test_a_count_beside_list_or_clear_is_refused_not_dropped(flag):
    call_command("fault", "tracker.create", "commit_then_timeout", stdout=io.StringIO())
    with pytest.raises(CommandError, match=f"^{flag} takes no --times$"):
        call_command("fault", flag, "--times", "3", stdout=io.StringIO())
    assert len(faults.pending()) == 1  # nothing queued, nothing cleared
