"""The investigation card's duplicate risk of Re-run from step: a re-run sends its steps
again with new keys, so an effect that stands from there on is made a second time. The card
says so, naming it, instead of "nothing is sent"."""

import pytest

from audit.chain import Actor
from runs.machine.errors import PermanentError
from runs.models import AttentionReason, Step
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.investigation import investigate
from tests.agent_runs import advance
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_the_rerun_risk_names_the_task_a_rerun_would_create_a_second_time(script):
    script.plan["post-ledger"] = [PermanentError("400 ledger account closed")]
    run = advance(new_run(wake=False))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    tasks = [key for key, ref in script.effects.items() if ref.startswith("create-task")]
    assert len(tasks) == 1

    risks = {r.action: r.duplicate_risk for r in investigate(run).risks}
    assert "rerun_from_step" in risks
    assert risks["rerun_from_step"].startswith("high")
    assert "create-task" in risks["rerun_from_step"]
    assert "nothing is sent" not in risks["rerun_from_step"]

    # What the card warns of is what happens: re-run from create-task, and the tracker
    # holds a second task under the new key.
    ACTIONS["rerun_from_step"].perform(
        run.pk, actor=Actor.system("test"),
        given=ActionInput(reason="ledger account reopened", step="create-task"))
    advance(run)
    tasks = [key for key, ref in script.effects.items() if ref.startswith("create-task")]
    assert len(tasks) == 2
    assert Step.objects.get(run=run, name="create-task").status == "succeeded"


def test_with_no_effect_standing_the_rerun_risk_is_none(script):
    script.plan["create-task"] = [PermanentError("400 no such assignee")]
    run = advance(new_run(wake=False))
    risks = {r.action: r.duplicate_risk for r in investigate(run).risks}
    assert risks["rerun_from_step"].startswith("none")
    assert not script.effects
