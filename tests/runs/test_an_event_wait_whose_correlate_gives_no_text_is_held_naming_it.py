"""An event wait's correlate() must give the correlation key as text. One that gives None
(the input's field is missing) or a number would have waited under the key "None" or "42",
which every run missing the field shares, so one run's event would have been taken by
another. The run is held for a person instead, naming the workflow, the step and what
correlate() gave; a key given as text still waits."""

import pytest

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db


@pytest.fixture
def waits_under():
    declared = []

    def declare(correlate) -> None:
        flow = Workflow("test-correlated-wait", version=1, input=OrderIn)
        flow.wait_for_event("wait", event="paid", correlate=correlate)
        declared.append(flow)

    yield declare
    for flow in declared:
        registry.unregister(flow)


@pytest.mark.parametrize("given, kind", [
    (lambda data: data.get("purchase_order"), "NoneType"),
    (lambda data: data["amount"], "int"),
])
def test_a_correlation_key_that_is_not_text_holds_the_run_naming_the_step(script, waits_under,
                                                                          given, kind):
    waits_under(given)
    run = new_run("test-correlated-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert "workflow test-correlated-wait v1, step 'wait'" in run.status_message
    assert f"must return the correlation key as text, not {kind}" in run.status_message
    wait = step(run, "wait")
    # It never waited under a key made of what correlate() gave.
    assert (wait.status, wait.remote_ref) == (StepStatus.PENDING, "")


def test_a_correlation_key_given_as_text_waits_under_it(script, waits_under):
    waits_under(lambda data: f"po-{data['order']}")
    run = new_run("test-correlated-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    wait = step(run, "wait")
    assert wait.status == StepStatus.WAITING
    assert wait.remote_ref == f"awaiting-event:paid:po-{run.input['order']}"
