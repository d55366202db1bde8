"""The investigation card (the run page's, its own page, its Markdown to paste into a ticket,
and the API's) names the next action as the reader may take it: to a person who may not
take it (an auditor), it says that the action needs someone who holds its permission, the
one the operator action table gives it (the one the console's buttons ask); to a person
who may act, it reads as it always did."""

import pytest
from django.urls import reverse

from api.tokens import token_create
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from runs.operator.actions import ACTIONS
from runs.operator.guidance import recommend
from runs.operator.investigation import markdown_text
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
    assert recommend(run, _steps(run)).action.name == "reconcile"
    return run


def _steps(run):
    return list(Step.objects.filter(run=run).order_by("position"))


def _advised(run) -> str:
    return f"Reconcile: post-ledger: {recommend(run, _steps(run)).why}"


def _cards(client, run) -> dict[str, str]:
    """The next step as each of the console's surfaces gives it."""
    detail = client.get(reverse("console:run", args=[run.pk]))
    page = client.get(reverse("console:investigation", args=[run.pk]))
    markdown = client.get(reverse("console:investigation", args=[run.pk]), {"format": "md"})
    assert detail.status_code == page.status_code == markdown.status_code == 200
    next_line = [line for line in markdown.content.decode().splitlines()
                 if line.startswith("**Verdict:")]
    return {"run page": detail.context["card"].next_step,
            "investigation page": page.context["card"].next_step,
            "markdown": next_line[0].split(" Next: ", 1)[1],
            "html": page.content.decode()}


def _api_next_step(client, run, user) -> str:
    _, plaintext = token_create(name=f"for-{user.username}", workflows=["test-orders"],
                                acting_user=user)
    card = client.get(f"/api/runs/{run.pk}/investigation",
                      HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert card.status_code == 200, card.content
    return card.json()["next_step"]


def test_a_reader_who_may_not_reconcile_is_told_it_needs_someone_who_holds_the_right(
        client, client_for, auditor, unknown_posting):
    run = unknown_posting
    seq = run.audit_seq
    permission = ACTIONS["reconcile"].permission
    told = (f"{_advised(run).rstrip('.')}. aude may not reconcile this run: it needs "
            f"someone who holds runs.{permission} (Can reconcile steps) on test-orders.")
    cards = _cards(client_for(auditor), run)
    assert cards["run page"] == cards["investigation page"] == told
    assert cards["markdown"] == markdown_text(told)
    assert "aude may not reconcile this run" in cards["html"]
    client.logout()
    assert _api_next_step(client, run, auditor) == told
    assert Run.objects.get(pk=run.pk).audit_seq == seq  # the card changed nothing


def test_a_reader_who_may_reconcile_reads_the_next_step_as_it_was(
        client, client_for, operator, unknown_posting):
    run = unknown_posting
    cards = _cards(client_for(operator), run)
    assert cards["run page"] == cards["investigation page"] == _advised(run)
    assert cards["markdown"] == markdown_text(_advised(run))
    assert "may not reconcile" not in cards["html"]
    assert "needs someone who holds" not in cards["html"]
    client.logout()
    assert _api_next_step(client, run, operator) == _advised(run)
