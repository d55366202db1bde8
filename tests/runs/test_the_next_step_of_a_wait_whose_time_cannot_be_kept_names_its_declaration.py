"""A sleep or an event wait whose time the database cannot keep (a duration past the year
9999) fails as a permanent error (timers.failed_for_its_time). The next step said "The remote
system refused nap. Fix the cause (data, credentials, permission) first": there is no remote
system, and a retry under the same code fails the same way. It now says the wait's own
declaration gives that time and that code giving another must be released before the
retry; a write's permanent error is still told as the remote system's refusal."""

from datetime import timedelta

import pytest

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import AttentionReason, Run, RunStatus, Step
from runs.operator.guidance import recommend
from tests.factories import new_run, place
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db


@pytest.fixture
def far_waits():
    flows = [Workflow("test-far-sleep", version=1, input=OrderIn),
             Workflow("test-far-event", version=1, input=OrderIn)]
    flows[0].sleep("nap", duration=timedelta(days=999_999_999))
    flows[1].wait_for_event("paid", event="payment.settled",
                            timeout=timedelta(days=999_999_999))
    yield
    for flow in flows:
        registry.unregister(flow)


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


@pytest.mark.parametrize("workflow, wait", [("test-far-sleep", "nap"),
                                            ("test-far-event", "paid")])
def test_a_wait_past_the_year_9999_is_led_to_its_declaration(script, far_waits, workflow,
                                                              wait):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR

    advice = recommend(run, _steps(run))
    assert advice.meant == "retry_step" and advice.step == wait
    assert f"{wait} would wait until a time the database cannot keep" in advice.why
    assert "declaration of the wait" in advice.why
    assert "remote system" not in advice.why and "credentials" not in advice.why


def test_a_writes_permanent_error_is_still_the_remote_systems_refusal():
    run = place(new_run("test-orders"), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                status_message="create-task: 422 refused",
                step_statuses={"create-task": "failed"})
    assert recommend(run, _steps(run)).why.startswith("The remote system refused create-task")
