"""`manage.py list_runs --workflow NAME --user X` refuses a NAME that is part of no workflow
X may see, and names only the workflows X may see (the console's runs list's rule): it
named every workflow known, those whose runs X may not see included. A workflow beyond
X's, with runs or not, is told as unknown, as GET /api/runs tells a token's. Without
--user, or for a user who may see every workflow, the known workflows close to NAME are
named (a few, never every one)."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _refusal(*args) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("list_runs", *args, stdout=out)
    assert out.getvalue() == ""  # nothing listed
    return str(refused.value)


@pytest.fixture
def two_workflows(finance_operator):
    """Runs of test-orders, which fin may see, and of test-approval, which fin may not."""
    new_run("test-approval")
    assert set(Run.objects.values_list("workflow_name", flat=True)) == \
        {"test-orders", "test-approval"}


@pytest.mark.parametrize(("named", "close"), [
    ("nope", ""), ("test-approval", ""), ("approval", ""),
    ("test-ordres", " (close names: test-orders)")])
def test_a_workflow_the_user_may_not_see_is_refused_naming_only_theirs(two_workflows,
                                                                       named, close):
    message = _refusal("--workflow", named, "--user", "fin")
    assert message == (f"--workflow: no workflow whose runs user 'fin' may see has a name "
                       f"containing {named!r}{close}")
    assert "test-approval" not in message.replace(repr(named), "")


def test_a_workflow_the_user_may_see_is_listed(two_workflows):
    out = io.StringIO()
    call_command("list_runs", "--workflow", "orders", "--user", "fin", stdout=out)
    assert "test-orders" in out.getvalue() and "test-approval" not in out.getvalue()


def test_a_user_who_may_see_no_workflow_is_told_of_none(two_workflows):
    User.objects.create_user("nobody", password="pw")
    assert _refusal("--workflow", "orders", "--user", "nobody") == (
        "--workflow: no workflow whose runs user 'nobody' may see has a name containing "
        "'orders' (they may see no workflow's runs)")


def test_who_may_see_every_workflow_is_told_of_the_known_ones_close_to_it(two_workflows,
                                                                          operator):
    for args in (("--user", "olga"), ()):
        message = _refusal("--workflow", "test-aproval", *args)
        assert message.startswith("--workflow: no workflow's name contains 'test-aproval' "
                                  "(close names: test-approval, ")
        assert "\n" not in message and len(message.split(", ")) <= 3
