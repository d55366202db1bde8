"""The run page leads a run in attention with one recommended action and its runbook; the
investigation card is on the page, as its own page, as Markdown and from the API."""

import pytest
from django.urls import reverse

from runs.machine.errors import UnknownOutcome
from runs.models import Run, Step
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def unknown_run(script):
    from runs.execution import executor

    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def test_a_run_in_attention_leads_with_one_primary_action_and_its_runbook(
        client_for, operator, unknown_run):
    page = client_for(operator).get(reverse("console:run", args=[unknown_run.pk]))
    body = page.content.decode()
    assert 'id="next-step"' in body
    assert body.count('class="primary"') == 1
    assert 'id="recommended-reconcile"' in body and "Reconcile: post-ledger" in body
    assert reverse("console:runbook", args=["unknown_outcome"]) in body
    runbook = client_for(operator).get(reverse("console:runbook", args=["unknown_outcome"]))
    assert runbook.status_code == 200
    assert "the side effect may or may not have happened" in runbook.content.decode()


def test_an_auditor_sees_the_advice_but_no_button(client_for, auditor, unknown_run):
    body = client_for(auditor).get(reverse("console:run", args=[unknown_run.pk])) \
        .content.decode()
    assert 'id="next-step"' in body and 'id="recommended-' not in body
    assert "You may not reconcile this run" in body


def test_the_investigation_card_as_a_page_and_as_markdown(client_for, operator, unknown_run):
    client = client_for(operator)
    url = reverse("console:investigation", args=[unknown_run.pk])
    page = client.get(url).content.decode()
    assert "Facts" in page and "Inferences" in page and "Duplicate risk" in page
    markdown = client.get(url, {"format": "md", "lookups": "1"})
    assert markdown["Content-Type"].startswith("text/markdown")
    assert f"# Investigation: run {unknown_run.pk}" in markdown.content.decode()
    assert "lookups made now" in markdown.content.decode()


def test_lookups_for_the_card_need_the_reconcile_permission(client_for, auditor, unknown_run):
    url = reverse("console:investigation", args=[unknown_run.pk])
    client = client_for(auditor)
    assert client.get(url).status_code == 200
    before = Step.objects.get(run=unknown_run, name="post-ledger").status
    assert client.get(url, {"lookups": "1"}).status_code == 403
    assert Step.objects.get(run=unknown_run, name="post-ledger").status == before


def test_the_api_serves_the_investigation_card(client, unknown_run):
    from api.tokens import token_create

    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    response = client.get(f"/api/runs/{unknown_run.pk}/investigation",
                          HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    card = response.json()
    assert card["run_id"] == unknown_run.pk and card["verdict"] == "limited"
    assert {s["step"]: s["effect"] for s in card["steps"]}["post-ledger"] == "unconfirmed"
    other = new_run("test-saga")
    assert client.get(f"/api/runs/{other.pk}/investigation",
                      HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 404


def test_the_run_page_shows_each_step_s_line(client_for, operator, script):
    run = new_run()
    from runs.execution import executor

    executor.advance_run(run.pk, worker="w1")
    body = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "change another system" in body and "ask the model for a decision" in body
    from runs.machine.intentions import step_lines

    lines = step_lines(Run.objects.get(pk=run.pk), list(run.steps.order_by("position")))
    assert lines["fetch"] == "read"
