"""Drill 5 restarts a worker after a decision was stored by killing it before the next step's
call. Where only a wait follows the decision, no worker is at work after it: the drill was
reported as a failure ("the worker never reached the crash point") and `manage.py drill`
exited 1 for a workflow that recovers correctly. Now its row says it was not exercised and
why, the summary counts it, and the command exits 0 when nothing failed. A real failure
still fails."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    import tests.drill_wait_workflows  # noqa: F401  (registers them here too)

    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_wait_workflows", "tests.workflows"]


def test_a_decision_only_a_sleep_follows_is_not_exercised_and_the_command_succeeds(capsys):
    call_command("drill", "test-drill-decides-last")  # no CommandError: exit status 0

    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "5 restart after the decision" in line)
    assert "not exercised: only waits follow decide (cool-off)" in row
    assert "| not exercised" in row and "FAIL" not in row
    assert "1 drill(s) not exercised (no failure; the row says why): 5 restart" in out
    assert "all applicable drills passed that could be exercised" in out
    assert out.count("| PASS") == 3  # 1, 2 and 8 were drilled and passed


def test_a_real_failure_still_fails_the_command(capsys):
    with pytest.raises(CommandError, match=r"^2 drill\(s\) failed: 1 crash before the request "
                                           r"\(post-unkeyed\); 2 crash after the call"):
        call_command("drill", "test-unsafe")
    assert "not exercised" not in capsys.readouterr().out
