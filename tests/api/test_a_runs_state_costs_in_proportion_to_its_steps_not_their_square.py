"""GET /api/runs/<id> (and the console's run page, the investigation card, show_run: every
door that lists the steps an action can be aimed at) reads the rules of a re-run once for the
run, not once per step: it took 6 s for a run of 2,000 steps, 20 s for its console page, and
a run of 20,000 steps would never have answered. Measured by the lines of the runtime's code
executed (runs/), which grow as the steps do: ten times the steps, not a hundred times the
work. Not by time."""


import pytest
from pydantic import BaseModel

from api.tokens import token_create
from runs.definitions.definition import Workflow
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from tests.factories import new_run
from tests.line_counts import lines_of_runtime_code

pytestmark = pytest.mark.django_db



class LoopIn(BaseModel):
    order: str


def _loop(name: str, steps: int) -> Workflow:
    workflow = Workflow(name, version=1, input=LoopIn)
    for position in range(steps):
        workflow.read(f"s{position}")(lambda ctx, i=position: {"i": i})
    return workflow


SHORT, LONG = _loop("test-state-short", 40), _loop("test-state-long", 400)


def _state_lines(client, workflow: Workflow, steps: int) -> int:
    # Every step done but the last, whose outcome is unknown: a re-run can start from none.
    run = new_run(workflow.name, wake=False)
    Step.objects.filter(run=run).update(status=StepStatus.SUCCEEDED, result={"i": 0})
    Step.objects.filter(run=run, position=steps - 1).update(status=StepStatus.UNKNOWN)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.ATTENTION, attention_reason=AttentionReason.UNKNOWN_OUTCOME,
        steps_done=steps - 1, current_step=f"s{steps - 1}")
    _, plaintext = token_create(name=f"erp-{steps}", workflows=[workflow.name], rate_limit=None)
    response, lines = lines_of_runtime_code(lambda: client.get(
        f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}"))
    assert response.status_code == 200, response.content
    assert response.json()["step_count"] == steps
    assert response.json()["current_step"]["status"] == StepStatus.UNKNOWN
    return lines


def test_a_run_of_ten_times_the_steps_costs_about_ten_times_the_work(client):
    short, long = _state_lines(client, SHORT, 40), _state_lines(client, LONG, 400)
    # Linear: under 10 times (the fixed part counts once); it was 54 times (609,412 lines
    # against 11,252) while each step read every step again.
    assert long < 15 * short, (short, long)
