"""The run page links a summary turn to its transcript (runs.agents.agent_history), and the
download (console.transcript_views) serves the artifact, checked against its sha256, to
whoever may view the run, and to nobody else."""

import hashlib

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from runs.machine import artifacts
from runs.models import AgentTurn, Workflow
from tests.demo.test_agent_history_transcript import summarised_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def summarised(live_sandbox, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = summarised_run("tenant-42:download")
    return run, AgentTurn.objects.get(step__run=run, index=4)


@pytest.fixture
def viewer(summarised):
    """May view the runs of the summarised agent's workflow only (an object permission)."""
    user = User.objects.create_user("vera", password="pw")
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="test-triage-summarised"))
    return user


def test_the_summary_turn_links_its_transcript_and_a_viewer_downloads_it(summarised, viewer,
                                                                       client_for):
    run, summary = summarised
    client = client_for(viewer)
    url = reverse("console:turn_artifact", args=[run.pk, summary.pk])
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'href="{url}"' in page
    assert "Download the transcript of turns 0-2" in page
    assert summary.transcript["sha256"][:13] in page

    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="run-{run.pk}-triage-turn-4-transcript.json"')
    body = response.content
    assert len(body) == summary.transcript["size"]
    assert hashlib.sha256(body).hexdigest() == summary.transcript["sha256"]
    assert body == artifacts.read(summary.transcript)


def test_nobody_else_downloads_it(summarised, finance_operator, client_for, client):
    run, summary = summarised
    url = reverse("console:turn_artifact", args=[run.pk, summary.pk])
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login")
    # May view test-orders runs, not this workflow's.
    refused = client_for(finance_operator).get(url)
    assert refused.status_code == 403 and b"iban" not in refused.content
    nobody = User.objects.create_user("nobody", password="pw")
    assert client_for(nobody).get(url).status_code == 403
    # A turn of another run, an ordinary turn, a turn that does not exist: not found.
    ordinary = AgentTurn.objects.get(step__run=run, index=3)
    admin = client_for(User.objects.create_superuser("root", password="pw"))
    for run_id, turn_id in ((run.pk + 1, summary.pk), (run.pk, ordinary.pk),
                            (run.pk, summary.pk + 100)):
        response = admin.get(reverse("console:turn_artifact", args=[run_id, turn_id]))
        assert response.status_code == 404
    assert admin.post(url).status_code == 405


def test_a_damaged_or_missing_transcript_is_refused_with_the_reason_never_served(
        summarised, viewer, client_for, settings, caplog):
    run, summary = summarised
    client = client_for(viewer)
    url = reverse("console:turn_artifact", args=[run.pk, summary.pk])
    stored = settings.VAR_DIR / "artifacts" / summary.transcript[artifacts.ARTIFACT]
    original = stored.read_bytes()
    stored.write_bytes(original.replace(b"invoice", b"INVOICE", 1))

    damaged = client.get(url)
    assert damaged.status_code == 410 and damaged["Content-Type"].startswith("text/plain")
    text = damaged.content.decode()
    assert "does not match its sha256" in text and summary.transcript["sha256"] in text
    assert b"INVOICE" not in damaged.content  # what the file holds now is not served
    assert any("does not match its sha256" in r.getMessage() for r in caplog.records)

    stored.unlink()
    missing = client.get(url)
    assert missing.status_code == 410 and "cannot be read" in missing.content.decode()

    stored.write_bytes(original)  # restored from a backup: served again
    assert client.get(url).content == original
