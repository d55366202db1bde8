"""GET /api/runs/{id}/investigation, asked by a token that acts for nobody, says that the
action it advises needs a person (the token can take no operator action) and which
permission that person needs, as a person who may not take it is told who may. Whoever
made the token, even one who may take the action: the token acts for nobody. A token that
acts for a person who may act reads the advice as it was."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from runs.operator.actions import ACTIONS
from runs.operator.guidance import recommend
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_posting(script):
    """A run in attention: whether its ledger posting took effect is unknown (Reconcile is
    the advice)."""
    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run(wake=False)
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    steps = list(Step.objects.filter(run=run).order_by("position"))
    assert recommend(run, steps).action.name == "reconcile"
    return run, f"Reconcile: post-ledger: {recommend(run, steps).why}"


def _card(client, plaintext, run) -> dict:
    response = client.get(f"/api/runs/{run.pk}/investigation",
                          HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_token_acting_for_nobody_is_told_the_advice_needs_a_person_and_which_permission(
        client, unknown_posting):
    run, advised = unknown_posting
    seq = run.audit_seq
    boss = User.objects.create_superuser("boss")
    _, plaintext = token_create(name="erp", workflows=["test-orders"], created_by=boss)
    permission = ACTIONS["reconcile"].permission
    told = (f"{advised.rstrip('.')}. API token erp acts for nobody, so it can take no "
            f"operator action: it takes a person who holds runs.{permission} (Can reconcile "
            f"steps) on test-orders to reconcile this run.")
    assert _card(client, plaintext, run)["next_step"] == told
    assert Run.objects.get(pk=run.pk).audit_seq == seq  # the card changed nothing


def test_a_token_acting_for_a_person_who_may_act_reads_the_advice_as_it_was(
        client, unknown_posting):
    run, advised = unknown_posting
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    _, plaintext = token_create(name="olga-erp", workflows=["test-orders"], acting_user=olga)
    card = _card(client, plaintext, run)
    assert card["next_step"] == advised
    assert "acts for nobody" not in card["next_step"]
