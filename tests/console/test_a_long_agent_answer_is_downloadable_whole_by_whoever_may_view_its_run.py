"""An agent's final answer longer than RUNS_AGENT_TEXT_MAX_CHARS is kept whole in an artifact
its turn references (runs.agents.turn_bounds), while the turn's content keeps only its start.
The run page's conversation links the whole answer and GET /api/runs/{id} lists it, by the
download a summary's transcript has (console.transcript_views): served, checked against its
sha256, to whoever may view the run, and to nobody else."""

import hashlib
import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from runs.agent_models import AgentTurn
from runs.machine import artifacts
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, Workflow
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)

BOUND = 2000
# The step after the agent messages its answer (up to 20,000 characters): longer than the
# bound, and it still fits.
ANSWER = "".join(f"line {i} of the summary.\n" for i in range(500))
TAIL = "line 499 of the summary."


@pytest.fixture
def answered(live_sandbox, settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path
    settings.RUNS_AGENT_TEXT_MAX_CHARS = BOUND
    scripted(monkeypatch, ModelTurn(content=ANSWER, tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    turn = AgentTurn.objects.get(step__run=run, step__name="triage")
    # The turn keeps the start; the tail is only in the artifact.
    assert TAIL not in turn.content and artifacts.is_artifact(turn.transcript)
    return run, turn


@pytest.fixture
def viewer(answered):
    """May view the triage workflow's runs only (an object permission), act on none."""
    user = User.objects.create_user("vera", password="pw")
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="invoice-triage"))
    return user


def test_the_run_page_links_the_whole_answer_and_a_viewer_downloads_it(answered, viewer,
                                                                      client_for):
    run, turn = answered
    client = client_for(viewer)
    url = reverse("console:turn_artifact", args=[run.pk, turn.pk])
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'href="{url}"' in page
    assert "Download the whole answer" in page
    assert turn.transcript["sha256"][:13] in page

    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="run-{run.pk}-triage-turn-{turn.index}-answer.json"')
    assert hashlib.sha256(response.content).hexdigest() == turn.transcript["sha256"]
    assert json.loads(response.content) == ANSWER


def test_the_api_lists_the_whole_answer_with_that_download(answered, client):
    run, turn = answered
    _, plaintext = token_create(name="reader", workflows=["invoice-triage"])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    (agent,) = response.json()["agent_steps"]
    assert agent["summaries"] == []
    assert agent["long_answers"] == [{
        "turn": turn.index,
        "transcript": {
            "reference": turn.transcript[artifacts.ARTIFACT],
            "size": turn.transcript["size"], "sha256": turn.transcript["sha256"],
            "download_url": "http://testserver" + reverse(
                "console:turn_artifact", args=[run.pk, turn.pk])}}]
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert "long_answers" in schemas["AgentStep"]["required"]


def test_nobody_who_may_not_view_the_run_downloads_it(answered, finance_operator,
                                                      client_for, client):
    run, turn = answered
    url = reverse("console:turn_artifact", args=[run.pk, turn.pk])
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login")
    # May view test-orders runs, not the triage's.
    refused = client_for(finance_operator).get(url)
    assert refused.status_code == 403 and TAIL.encode() not in refused.content
    page = client_for(finance_operator).get(reverse("console:run", args=[run.pk]))
    assert page.status_code in (403, 404) and url.encode() not in page.content
    nobody = User.objects.create_user("nobody", password="pw")
    assert client_for(nobody).get(url).status_code == 403
