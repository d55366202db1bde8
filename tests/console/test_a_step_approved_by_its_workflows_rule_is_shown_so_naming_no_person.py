"""An approval step the workflow's rule approved (approve_if: no person needed) is shown as
such wherever a run is read: on the run page, its row says it was approved by the
workflow's rule and that no person was asked (read from its result), what it does says it
waits for a person unless its rule approves, and the timeline has the record of it, by the
worker, naming no person; its reference names who approved it, as a person's approval
leaves it ("approved by ann"), and no more: a step's reference is another system's, shown
as such by show_run and the API's history; its recovery contract says so; and a webhook
subscriber is told of it as of any step's outcome."""

import io
import json
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

import tests.approvals.workflows  # noqa: F401  (registers test-approval-by-rule)
from api.models import WebhookSubscriber
from api.tokens import token_create
from api.webhook_cursors import news_for
from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.definitions.contracts import step_contract
from runs.definitions.definition import registry
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db

SAID = "approved by the workflow's rule; no person was asked"
# As a person's approval leaves its reference: "approved by" whoever approved it.
REFERENCE = "approved by the workflow's rule"


@pytest.fixture
def approved_by_rule(script) -> Run:
    script.reset()
    run = new_run("test-approval-by-rule", amount=20)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_the_run_page_says_the_rule_approved_the_step_and_no_person_was_asked(
        approved_by_rule, client):
    run = approved_by_rule
    client.force_login(User.objects.create_superuser("root"))
    page = client.get(reverse("console:run", kwargs={"run_id": run.pk})).content.decode()

    number = step(run, "approve").position + 1
    row = re.search(rf'<tr id="step-{number}">.*?</tr>', page, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    status, reference = cells[4], cells[7]
    assert SAID.replace("'", "&#x27;") in status
    assert reference.strip() == REFERENCE.replace("'", "&#x27;")
    assert "wait for a person&#x27;s approval, unless its rule approves" in row
    assert "succeeded" in row
    # The timeline's entry of the record: by the worker, the system; no person named.
    entry = next(e for e in re.findall(r"<tr class=\"t-audit\">.*?</tr>", page, re.S)
                 if "approved by rule" in e)
    assert "<td>w1 (system)</td>" in entry and "root" not in entry
    assert "person_asked" in entry


def test_show_run_and_the_api_history_say_the_same(approved_by_rule, client):
    run = approved_by_rule
    out = io.StringIO()
    call_command("show_run", str(run.pk), "--json", stdout=out)
    shown = next(s for s in json.loads(out.getvalue())["steps"] if s["name"] == "approve")
    assert (shown["status"], shown["remote_ref"]) == ("succeeded", REFERENCE)

    _, plaintext = token_create(name="erp", workflows=[run.workflow_name])
    history = client.get(f"/api/runs/{run.pk}/history",
                         HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    (entry,) = [e for e in history["entries"] if e["action"] == "approved_by_rule"]
    assert entry["step"] == "approve" and entry["actor_kind"] == "system"
    assert entry["data"]["person_asked"] is False
    assert entry["data"]["decided_by"] == "the workflow's rule"
    assert entry["after"]["remote_ref"] == REFERENCE
    assert not [e for e in history["entries"]
                if e["action"] in ("approval_requested", "approval_decided")]


def test_its_contract_says_a_person_is_asked_only_when_the_rule_asks(approved_by_rule):
    spec = registry.latest("test-approval-by-rule").step("approve")
    contract = step_contract(spec)
    assert "unless its approve_if says none is needed" in contract.side_effect
    assert contract.stop_condition.startswith(
        "when its approve_if asks for a person, or cannot be read: no decision within")
    plain = step_contract(registry.latest("test-approval").step("approve"))
    assert plain.side_effect == "waits for a person"


def test_a_subscriber_is_told_of_it_as_of_a_steps_outcome(approved_by_rule):
    subscriber = WebhookSubscriber.objects.create(name="erp", url="https://erp.example/hook",
                                                  workflows=[])
    _, records = news_for(subscriber)
    record = AuditRecord.objects.get(run=approved_by_rule, action=AuditAction.APPROVED_BY_RULE)
    assert records.filter(pk=record.pk).exists()
