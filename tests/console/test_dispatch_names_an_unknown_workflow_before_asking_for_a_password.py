"""manage.py dispatch pause|resume (and schedules pause|resume) tells a misspelt workflow,
system or schedule before it asks for the acting person's password: the refusal
act_on_workflow would give after it (no workflow 'X'), with nothing paused, resumed or
recorded. A workflow that exists is still acted on only once the
password is given."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_password_and_no_terminal(monkeypatch):
    # Asked now, the password would be refused as not given (console.cli.proven).
    monkeypatch.delenv("CLI_PASSWORD")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _nothing_written() -> bool:
    return not DispatchPause.objects.exists() and not ControlRecord.objects.exists()


@pytest.mark.parametrize("verb", ["pause", "resume"])
@pytest.mark.parametrize("system", [[], ["--system", "ledger"]])
def test_an_unknown_workflow_is_named_and_no_password_is_asked(operator, verb, system):
    with pytest.raises(CommandError, match="^no workflow 'test-ordres'$"):
        call_command("dispatch", verb, "test-ordres", *system, "--user", "olga",
                     "--reason", "INC-9")
    assert _nothing_written()


def test_who_may_not_pause_is_told_so_whether_the_workflow_exists_or_not(auditor):
    # The permission comes before the name, as act_on_workflow has it: names are not probed.
    for workflow in ("test-ordres", "test-orders"):
        with pytest.raises(CommandError, match=f"^aude may not pause or resume {workflow} "):
            call_command("dispatch", "pause", workflow, "--user", "aude", "--reason", "x")
    assert _nothing_written()


def test_a_workflow_that_exists_still_needs_the_password(operator):
    with pytest.raises(CommandError, match="^no password given for olga"):
        call_command("dispatch", "pause", "test-orders", "--user", "olga", "--reason", "INC-9")
    assert _nothing_written()


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_system_no_step_reaches_is_named_and_no_password_is_asked(operator, verb):
    with pytest.raises(CommandError, match="^no step of test-two-systems reaches a system "
                                           "'ledgr'; its systems: 'ledger', 'tracker'$"):
        call_command("dispatch", verb, "test-two-systems", "--system", "ledgr",
                     "--user", "olga", "--reason", "INC-9")
    assert _nothing_written()


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_schedule_command_names_an_unknown_schedule_and_asks_no_password(operator, verb):
    with pytest.raises(CommandError, match="^no schedule 'nightly-typo' of 'test-orders'$"):
        call_command("schedules", verb, "test-orders", "nightly-typo", "--user", "olga",
                     "--reason", "INC-9")
    assert _nothing_written()
