"""list_runs never answers with nothing: no match says so, and a user who may see no
workflow's runs is told that, rather than shown an empty page that reads as a command that
did nothing."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _listed(*args) -> str:
    out = io.StringIO()
    call_command("list_runs", *args, stdout=out)
    return out.getvalue()


def test_a_user_who_may_see_no_workflow_is_told_so():
    new_run()
    User.objects.create_user("nobody", password="pw")
    assert _listed("--user", "nobody").strip() == "user 'nobody' may see no workflow's runs"


def test_a_search_that_matches_nothing_says_so(operator):
    run = new_run()
    assert _listed("--search", "no-such-key").strip() == "no run matches"
    listed = _listed("--user", "olga")
    assert run.business_key in listed and "no run" not in listed
