"""GET /api/runs/{id} lists each agent step's summary turns with the reference, size and
sha256 of the artifact holding the turns each one covers (runs.agents.agent_history)."""

import pytest
from django.urls import reverse

from runs.machine import artifacts
from runs.models import AgentTurn
from tests.demo.test_agent_history_transcript import summarised_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_summary_turn_comes_with_its_transcript_artifact(live_sandbox, settings, tmp_path,
                                                          client, make_token):
    settings.VAR_DIR = tmp_path
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = summarised_run("tenant-42:api")
    summary = AgentTurn.objects.get(step__run=run, index=4)
    _, plaintext = make_token("reader", workflows=["test-triage-summarised"])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    (agent,) = response.json()["agent_steps"]
    assert agent["summaries"] == [{
        "turn": 4, "summarises": 3,
        "transcript": {
            "reference": summary.transcript[artifacts.ARTIFACT],
            "size": summary.transcript["size"], "sha256": summary.transcript["sha256"],
            "download_url": "http://testserver" + reverse(
                "console:turn_artifact", args=[run.pk, summary.pk])}}]


def test_the_openapi_document_describes_the_summaries(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert "summaries" in schemas["AgentStep"]["required"]
    assert set(schemas["TranscriptArtifact"]["properties"]) == {
        "reference", "size", "sha256", "download_url"}
