"""The investigation card's risk line for Deliver event (and Skip event) said "nothing is
sent", as for Cancel and Terminate; the run then goes on to its later steps, which are sent.
It now says so: none of what was sent is sent again, the later steps are sent for the first
time, each with its own key."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.execution import executor
from runs.models import AttentionReason, Run, RunStatus, Step
from runs.operator.investigation import investigate
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_deliver_and_skip_event_say_the_run_goes_on_to_its_later_steps(script):
    # Its wait timed out under "escalate": Deliver event and Skip event are offered.
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    past = timezone.now() - timedelta(minutes=5)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.EVENT_TIMED_OUT
    risks = {r.action: r.duplicate_risk for r in investigate(run).risks}
    assert {"event_received", "skip_event"} <= set(risks), risks
    for action in ("event_received", "skip_event"):
        assert "the run goes on to its later steps" in risks[action]
        assert "nothing is sent" not in risks[action]
    assert "nothing is sent" in risks["terminate"]
