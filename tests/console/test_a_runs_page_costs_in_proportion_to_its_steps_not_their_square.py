"""The console's run page looks each of its steps' declarations up by name once, not by a
search of the workflow's steps for each: a run of 2,000 steps spent seconds there, and one of
20,000 would never have drawn. Measured by the lines of the project's code executed (not
Django's, not the tests'): ten times the steps, about ten times the work. Not by time."""


import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import new_run
from tests.line_counts import lines_of_project_code

pytestmark = pytest.mark.django_db



class LoopIn(BaseModel):
    order: str


def _loop(name: str, steps: int) -> Workflow:
    workflow = Workflow(name, version=1, input=LoopIn)
    for position in range(steps):
        workflow.read(f"s{position}")(lambda ctx, i=position: {"i": i})
    return workflow


SHORT, LONG = _loop("test-page-short", 40), _loop("test-page-long", 400)


def _page_lines(client, workflow: Workflow, steps: int) -> int:
    # A completed run: every step succeeded.
    run = new_run(workflow.name, wake=False)
    Step.objects.filter(run=run).update(status=StepStatus.SUCCEEDED, result={"i": 0})
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, steps_done=steps,
                                         current_step="")
    # The page of the steps that holds the last one (the table draws a page at a time).
    response, lines = lines_of_project_code(
        lambda: client.get(f"/runs/{run.pk}/?steps={steps}"))
    assert response.status_code == 200
    assert f"<strong>s{steps - 1}</strong>" in response.content.decode()
    return lines


def test_a_run_of_ten_times_the_steps_draws_with_about_ten_times_the_work(client):
    client.force_login(User.objects.create_superuser("boss", "boss@example.org", "pw"))
    short, long = _page_lines(client, SHORT, 40), _page_lines(client, LONG, 400)
    # Linear: under 7 times (the fixed part counts once); it was 43 times (881,823 lines
    # against 20,521) while each step searched the declarations for its own.
    assert long < 15 * short, (short, long)
