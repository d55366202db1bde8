"""A bulk job carries one reason and at most a step for all its runs. Two actions need more of
each run: Confirm the undo sends a high-impact undo that a person must see, prepared, on the
run's page first (the design's rule for compensation), and Deliver event needs each run's
payload. Neither is taken by a filter, by any caller: the function every caller goes
through refuses them, and the console, the API and the CLI do not offer them."""

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from api.tokens import token_create
from approvals.bulk import BulkRefused, start_bulk_job
from approvals.models import BulkJob
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

PAUSED = RunFilters(status=RunStatus.ATTENTION)


@pytest.fixture
def olga(db, monkeypatch):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    return user


def _paused_before_a_high_impact_undo() -> Run:
    run = place(new_run(), status=RunStatus.ATTENTION, current_step="post-ledger",
                attention_reason=AttentionReason.COMPENSATION_PAUSED,
                step_statuses={"fetch": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    # The run's own page would offer the confirmation: the refusal below is bulk's alone.
    steps = list(Step.objects.filter(run=run).order_by("position"))
    assert ACTIONS["confirm_compensation"].refusal(run, steps) is None
    return run


@pytest.mark.parametrize("action, why", [
    ("confirm_compensation", "sends an undo a person must see first, on each run's page"),
    ("event_received", "needs the event's payload of each run, which a job does not carry"),
])
def test_the_function_every_caller_goes_through_refuses_it_and_writes_nothing(
        olga, action, why):
    run = _paused_before_a_high_impact_undo()
    records = AuditRecord.objects.count()
    with pytest.raises(BulkRefused, match=why):
        start_bulk_job(action, PAUSED, user=olga, reason="clear the backlog")
    with pytest.raises(CommandError, match=why):
        call_command("bulk_action", "start", action, "--user", "olga",
                     "--reason", "clear the backlog", stdout=io.StringIO())
    assert not BulkJob.objects.exists()
    assert AuditRecord.objects.count() == records
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert Step.objects.get(run=run, name="post-ledger").status == StepStatus.SUCCEEDED


def test_the_console_does_not_offer_them_and_refuses_them_by_hand(client, olga):
    _paused_before_a_high_impact_undo()
    client.force_login(olga)
    page = client.get(reverse("console:runs")).content.decode()
    assert 'value="terminate"' in page
    assert 'value="confirm_compensation"' not in page
    assert 'value="event_received"' not in page
    for action in ("confirm_compensation", "event_received"):
        preview = client.get(reverse("console:bulk_preview"),
                             {"action": action, "status": RunStatus.ATTENTION})
        assert preview.status_code == 404
        started = client.post(reverse("console:bulk_start"), {
            "action": action, "status": RunStatus.ATTENTION, "reason": "clear the backlog"})
        assert started.status_code == 404
    assert not BulkJob.objects.exists()


def test_the_api_refuses_them_naming_the_action_and_documents_why(client, olga):
    _paused_before_a_high_impact_undo()
    _, plaintext = token_create(name="t", workflows=["test-orders"], acting_user=olga)
    for action in ("confirm_compensation", "event_received"):
        response = client.post("/api/bulk", {"action": action, "reason": "clear the backlog"},
                               content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        assert response.status_code == 422
        assert any("action" in error["loc"] for error in response.json()["errors"])
    assert not BulkJob.objects.exists()
    schema = client.get("/api/openapi.json").json()["components"]["schemas"]["BulkIn"]
    action = schema["properties"]["action"]
    assert "Confirm the undo" in action["description"]
    assert "terminate" in action["enum"]
    assert not {"confirm_compensation", "event_received"} & set(action["enum"])
