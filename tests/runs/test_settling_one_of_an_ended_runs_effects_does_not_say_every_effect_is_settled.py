"""A run a person ended while two effects were unknown stays in attention until each is
settled. Settling the first wrote "ended (every effect settled (create-task: not found));
not settled yet: post-ledger ...", false while another remains: the run's message now says
what was recorded, and "every effect settled" only once none remains.

No worker path leaves two effects unknown at once (a run stops at its first unknown step,
an agent at its first unknown tool call): the rows are placed."""

import pytest

from audit.chain import Actor
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _not_done(run: Run, name: str) -> Run:
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="checked the remote system", step=name, mode="not_found",
        evidence=f"no {name} under its key in the remote system"))
    return Run.objects.get(pk=run.pk)


def test_settling_one_of_two_says_what_was_recorded_and_what_remains(script):
    run = new_run(wake=False)
    Step.objects.filter(run=run, name__in=["create-task", "post-ledger"]).update(
        status=StepStatus.UNKNOWN, attempt=1)
    place(run, status=RunStatus.ATTENTION, attention_reason=AttentionReason.ENDED_UNSETTLED,
          current_step="post-ledger", status_message="ended (order withdrawn)")

    run = _not_done(run, "create-task")
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.ENDED_UNSETTLED
    assert "every effect settled" not in run.status_message
    assert run.status_message.startswith("ended (create-task recorded as not found); "
                                         "not settled yet: post-ledger")

    run = _not_done(run, "post-ledger")
    assert run.status == RunStatus.TERMINATED
    assert run.status_message == "every effect settled (post-ledger: not found)"
