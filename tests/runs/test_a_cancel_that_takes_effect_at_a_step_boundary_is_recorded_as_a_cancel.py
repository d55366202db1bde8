"""A cancel asked for while a step is in flight takes effect at the next step boundary; the
record that ends the run there says "cancelled", as the record of a cancel taking effect at
once or inside an agent step does, not "terminated" (which a person's Terminate writes)."""

import pytest

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, step

pytestmark = pytest.mark.django_db


def test_the_cancel_at_the_step_boundary_is_recorded_as_cancelled(script):
    run = new_run(wake=False)

    def cancelled_while_in_flight(ctx):
        transitions.cancel(run.pk, actor=SYSTEM, reason="order withdrawn")
        return {"order": ctx.input.order}

    script.plan["fetch"] = [cancelled_while_in_flight]
    executor.advance_run(run.pk, worker="w1")

    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert step(run, "fetch").status == StepStatus.SUCCEEDED
    assert step(run, "classify").status == StepStatus.SKIPPED
    actions = list(AuditRecord.objects.filter(run=run).order_by("seq")
                   .values_list("action", flat=True))
    assert actions[-2:] == ["succeeded", "cancelled"]
    assert "terminated" not in actions
    # Nothing was sent after the boundary.
    assert [call[0] for call in script.calls] == ["fetch"]
