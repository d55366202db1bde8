"""manage.py run_action RUN --user NAME lists what the run offers NAME. show_run marks an
action that needs a second person "(four eyes)"; the listing did not, and an operator who
read "terminate  offered" learnt only once they had given their password and a reason that
it had become a request for another person to decide. Now the listing marks each such
action the same way, and its --json says `needs_second_person`, from the same rule as
show_run (the action table's needs_second_person): the two commands agree on every run."""

import io
import json

import pytest
from django.core.management import call_command

from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def command(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


def offered(run) -> dict[str, str]:
    out = command("run_action", run.pk, "--user", "olga")
    return dict(line.split(None, 1) for line in out.strip().splitlines())


@pytest.fixture
def effected_run():
    # post-ledger, a high-impact effect, took place: ending the run needs a second person.
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


@pytest.fixture
def effectless_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED})


def test_an_action_that_needs_a_second_person_is_marked_four_eyes(operator, effected_run):
    lines = offered(effected_run)

    assert lines["terminate"] == "offered (four eyes)"
    assert lines["resume"] == "offered"


def test_without_a_high_impact_effect_nothing_is_marked(operator, effectless_run):
    lines = offered(effectless_run)

    assert lines["terminate"] == "offered"
    assert not any("four eyes" in said for said in lines.values())


@pytest.mark.parametrize("run_fixture", ["effected_run", "effectless_run"])
def test_the_listing_marks_what_show_run_marks(operator, request, run_fixture):
    run = request.getfixturevalue(run_fixture)
    shown = json.loads(command("show_run", run.pk, "--json"))["operator_actions"]
    listed = json.loads(command("run_action", run.pk, "--user", "olga", "--json"))
    lines = offered(run)

    marked = {a["name"] for a in shown if a["needs_second_person"]}
    assert {a["action"] for a in listed if a["offered"] and a["needs_second_person"]} == marked
    assert {name for name, said in lines.items() if said.endswith("(four eyes)")} == marked
