"""manage.py drill's "approvals:" line says in how many of the drill's runs a person was
asked. It counted every drill run of the workflow started since the drill began: another
drill of the same workflow, run meanwhile (a second terminal, a CI job), added its runs to
the count. Each drill's runs carry its token in their business keys
(runs.operator.drill_batches), and the line counts those only."""

import pytest

from runs.execution import executor
from runs.machine.transitions import start_run
from runs.models import RunStatus
from runs.operator.drill_approvals import approvals_said, last_run_id
from runs.operator.drill_batches import drill_key, new_batch, started_in
from runs.operator.drills import DRILL
from tests.workflows import approval

pytestmark = pytest.mark.django_db

PATH = "through approval requests"


def _waiting_drill_run(tag: str):
    run, created = start_run(workflow=approval.name, business_key=drill_key(tag),
                             input={"order": tag}, actor=DRILL, wake=False, drill=True)
    assert created
    assert executor.advance_run(run.pk, worker="w1", drill=True) == RunStatus.WAITING
    return run


def test_a_drill_run_meanwhile_counts_in_its_own_line_not_in_this_one():
    before = last_run_id()
    mine, theirs = new_batch(), new_batch()
    with started_in(mine):
        ours = _waiting_drill_run("decision")
    with started_in(theirs):
        _waiting_drill_run("decision")
        _waiting_drill_run("compensation")

    assert f":{mine}-" in ours.business_key and ours.business_key.startswith("drill:decision:")
    assert approvals_said(approval, after=before, batch=mine, path=PATH) == \
        f"{PATH}, in 1 of 1 drill run"
    assert approvals_said(approval, after=before, batch=theirs, path=PATH) == \
        f"{PATH}, in 2 of 2 drill runs"


def test_a_run_of_real_work_with_a_key_like_a_drills_is_not_counted():
    before = last_run_id()
    batch = new_batch()
    with started_in(batch):
        key = drill_key("decision")
    start_run(workflow=approval.name, business_key=key, input={"order": "real"},
              actor=DRILL, wake=False)

    assert approvals_said(approval, after=before, batch=batch, path=PATH) == \
        "no drill run waited for a person's approval"
