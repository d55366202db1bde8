"""A final answer longer than RUNS_AGENT_TEXT_MAX_CHARS is kept whole in an artifact its turn
refers to; when the step's result is over RUNS_RESULT_INLINE_BYTES too, the result refers to
that same artifact (runs.machine.artifacts.kept_with_parts), never a second copy: before, the
answer was written again inside the result's own artifact, two files holding the same
megabytes. The step after it still reads it whole, and the run page and GET /api/runs/{id}
still offer it whole. The demo's triage agent, its model scripted, against the sandbox over
real HTTP."""

import gzip
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from archive.models import ArchiveFile
from runs.agent_models import AgentTurn
from runs.machine import artifacts
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import Run, RunStatus, Step
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)

# The step after the agent messages its answer (up to 20,000 characters): longer than the
# text bound and than the inline limit below, and it still fits.
ANSWER = "".join(f"line {i} of the summary.\n" for i in range(500))
TAIL = "line 499 of the summary."


@pytest.fixture
def answered(live_sandbox, settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path
    settings.RUNS_AGENT_TEXT_MAX_CHARS = 2000
    settings.RUNS_RESULT_INLINE_BYTES = 4096
    assert len(artifacts.encoded(ANSWER)) > 2 * 4096
    scripted(monkeypatch, ModelTurn(content=ANSWER, tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    return run, Step.objects.get(run=run, name="triage"), tmp_path / "artifacts"


def test_the_answer_is_stored_in_one_artifact_and_nowhere_else(answered):
    run, step, stored = answered
    # The agent step's files (the step after it keeps what it sent, a result of its own).
    holding = [path for path in stored.rglob("triage*.json")
               if TAIL.encode() in path.read_bytes()]
    assert len(holding) == 1, holding
    (only,) = holding
    assert only.read_bytes() == artifacts.encoded(ANSWER)
    assert sum(path.stat().st_size for path in holding) == len(artifacts.encoded(ANSWER))
    # The turn and the step's result both refer to that one file; neither row holds the text.
    turn = AgentTurn.objects.get(step=step)
    assert step.result["answer"] == turn.transcript
    assert stored / turn.transcript[artifacts.ARTIFACT] == only
    assert TAIL not in json.dumps(step.result) and TAIL not in turn.content
    assert len(json.dumps(step.result)) < 1000


def test_the_steps_after_it_read_the_answer_whole_with_its_counts(answered):
    run, step, _ = answered
    result = artifacts.Results({"triage": step.result})["triage"]
    assert result["answer"] == ANSWER
    assert result["turns"] == 1 and result["tool_calls"] == 0
    assert artifacts.PARTS not in result
    assert Step.objects.filter(run=run).exclude(status="succeeded").count() == 0


def test_the_run_page_and_the_api_offer_the_answer_whole(answered, client):
    run, step, _ = answered
    turn = AgentTurn.objects.get(step=step)
    url = reverse("console:turn_artifact", args=[run.pk, turn.pk])
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'href="{url}"' in page and "Download the whole answer" in page
    assert json.loads(client.get(url).content) == ANSWER
    client.logout()

    _, plaintext = token_create(name="reader", workflows=["invoice-triage"])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    (agent,) = response.json()["agent_steps"]
    (long_answer,) = agent["long_answers"]
    assert long_answer["transcript"]["sha256"] == turn.transcript["sha256"]
    assert long_answer["transcript"]["download_url"].endswith(url)


def test_an_archived_run_keeps_the_one_reference_and_the_answer_still_reads_whole(
        answered, settings, tmp_path):
    run, step, _ = answered
    settings.RUNS_RETENTION_DAYS = 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    then = timezone.now() - timedelta(days=40)
    Run.objects.filter(pk=run.pk).update(updated_at=then, finished_at=then)
    call_command("archive_runs")
    assert not Run.objects.filter(pk=run.pk).exists()

    path = tmp_path / "archive" / ArchiveFile.objects.get().name
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(text) for text in handle]
    (line,) = [x for x in lines if (x.get("run") or {}).get("id") == run.pk]
    (archived,) = [s for s in line["steps"] if s["name"] == "triage"]
    (turn,) = line["agent_turns"]
    assert archived["result"]["answer"] == turn["transcript"]
    assert TAIL not in json.dumps(line)
    assert artifacts.load(archived["result"])["answer"] == ANSWER
