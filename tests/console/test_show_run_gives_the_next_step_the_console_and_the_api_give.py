"""show_run tells a person at the command line the next step the console's run page and
the API's investigation card give, with its runbook: not only the list of actions the run
allows, where the unsafe-looking first one (resume) is not the advice."""

import io
import json

import pytest
from django.core.management import call_command

from api.tokens import token_create
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from runs.operator.guidance import recommend
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _show(run, *args) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), *args, stdout=out)
    return out.getvalue()


def test_an_unknown_ledger_posting_is_told_reconcile_on_every_surface(client, script):
    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run(wake=False)
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    advice = recommend(run, list(Step.objects.filter(run=run).order_by("position")))

    shown = json.loads(_show(run, "--json"))
    assert shown["next_step"] == {"action": "reconcile", "step": "post-ledger",
                                  "why": advice.why, "runbook": "unknown_outcome",
                                  "text": f"Reconcile: post-ledger: {advice.why}"}
    text = _show(run)
    assert f"  next: Reconcile: post-ledger: {advice.why}\n" in text
    assert "  runbook: docs/operations.md#runbook-unknown_outcome\n" in text

    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    card = client.get(f"/api/runs/{run.pk}/investigation",
                      HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    # The same advice; a token that acts for nobody is told it needs a person to take it
    # (tests/api/test_an_investigation_card_tells_a_token_acting_for_nobody_...).
    advised, note = card["next_step"].split(". API token erp acts for nobody", 1)
    assert f"{advised}." == f"Reconcile: post-ledger: {advice.why}"
    assert "runs.reconcile_run" in note
    assert not script.effects.get(Step.objects.get(run=run, name="post-ledger")
                                  .idempotency_key)


def test_a_run_that_needs_nobody_has_no_next_step(script):
    run = new_run(wake=False)
    executor.advance_run(run.pk, worker="w1")
    assert json.loads(_show(run, "--json"))["next_step"] is None
    assert "next:" not in _show(run)
