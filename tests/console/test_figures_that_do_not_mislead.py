"""Figures an operator reads at a glance: a step's TOOK is its execution time with the time
it waited shown apart, NEXT TRY goes once the step succeeded, and a lookup made for the
investigation card reports a step once, as found, never also as unknown."""

from datetime import datetime, timedelta

import pytest
from django.urls import reverse

from audit.models import AuditRecord
from console.step_times import step_times
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from runs.operator.investigation import investigate
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _stuck_unknown(script):
    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def test_took_counts_execution_and_shows_the_wait_apart(script, client_for, operator):
    run = _stuck_unknown(script)
    step = Step.objects.get(run=run, name="post-ledger")
    # The step sat in attention for 188 s before a person settled it.
    parked = step.started_at + timedelta(seconds=188)
    Step.objects.filter(pk=step.pk).update(status="succeeded", finished_at=parked,
                                           next_attempt_at=parked)
    steps = list(Step.objects.filter(run=run).order_by("position"))
    took = step_times(run, steps)["post-ledger"]
    outcome = AuditRecord.objects.get(run=run, step_name="post-ledger",
                                      action="outcome_unknown")
    began = datetime.fromisoformat(outcome.data["started_at"])
    assert took.executing == outcome.created_at - began
    assert took.executing < timedelta(seconds=5)
    assert took.waiting >= timedelta(seconds=183)
    body = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "waited 18" in body
    assert f"{parked:%H:%M:%S}" not in body  # no next try once the step succeeded


def test_a_step_found_by_the_card_s_lookup_is_not_also_unknown(script):
    run = _stuck_unknown(script)
    key = Step.objects.get(run=run, name="post-ledger").idempotency_key
    script.effects[key] = "PAY-5"
    card = investigate(run, lookups=True)
    assert any(f.text == "post-ledger took effect: found PAY-5" for f in card.facts)
    assert not any("post-ledger" in text for text in card.unconfirmed)
    row = next(s for s in card.steps if s.step == "post-ledger")
    assert row.status != "unknown" and row.effect == "exists" and row.remote_ref == "PAY-5"
    assert "found it (PAY-5)" in card.next_step and "whether" not in card.next_step
