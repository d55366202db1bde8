"""A rejection says why: without a comment it is refused by the one decision function, and
the console, the API (422, the project's error shape) and the CLI (a CommandError) each
name the missing comment in the rule's own words. Nothing is recorded on a refusal: the
request stays pending, undecided, and the run and its audit trail are as they were."""

import html
import io
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from api.tokens import token_create
from approvals.decisions import DecisionRefused, decide, decision_refusal
from approvals.models import ApprovalRequest, RequestStatus
from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

RULE = decision_refusal(approved=False, comment="")


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="olga-pw")
    carl = User.objects.create_user("carl", password="carl-pw")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


@pytest.fixture
def asked(people):
    """Olga's terminate of a run whose high-impact step took place: it waits for Carl."""
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    outcome = act("terminate", run.pk, user=people[0], given=ActionInput(reason="fraud"))
    assert outcome.approval is not None
    return outcome.approval


def _untouched(asked: ApprovalRequest, records: int) -> None:
    request = ApprovalRequest.objects.get(pk=asked.pk)
    assert (request.status, request.decided_by_id, request.decision_id, request.comment) == (
        RequestStatus.PENDING, None, None, "")
    assert Run.objects.get(pk=asked.run_id).status == RunStatus.ATTENTION
    assert AuditRecord.objects.count() == records


def test_the_rule_names_the_missing_comment_and_holds_only_for_a_rejection():
    assert "comment is missing" in RULE and "Say why you reject it." in RULE
    assert decision_refusal(approved=False, comment=" \n ") == RULE
    assert decision_refusal(approved=False, comment="not our vendor") is None
    assert decision_refusal(approved=True, comment="") is None


@pytest.mark.parametrize("comment", ["", "   "])
def test_the_decision_function_refuses_it_and_records_nothing(people, asked, comment):
    records = AuditRecord.objects.count()
    with pytest.raises(DecisionRefused, match="comment is missing") as refused:
        decide(asked.pk, user=people[1], approved=False, decision_id=uuid.uuid4(),
               comment=comment)
    assert refused.value.field == "comment"
    _untouched(asked, records)


def test_the_console_form_words_it_from_the_same_rule(people, asked, client):
    records = AuditRecord.objects.count()
    client.force_login(people[1])
    response = client.post(reverse("approvals:decide", kwargs={"pk": asked.pk}), {
        "decision": "reject", "comment": "", "decision_id": str(uuid.uuid4())})
    assert response.status_code == 400
    assert response.context["form"].errors["comment"] == [RULE]
    assert RULE in html.unescape(response.content.decode())
    _untouched(asked, records)


def test_the_api_answers_422_naming_the_comment(people, asked, client):
    records = AuditRecord.objects.count()
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=people[1])
    response = client.post(f"/api/approvals/{asked.pk}/decision",
                           {"approve": False, "decision_id": str(uuid.uuid4())},
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid_request" and body["detail"] == RULE
    assert [e["loc"] for e in body["errors"]] == [["comment"]]
    _untouched(asked, records)


def test_the_cli_raises_a_command_error_naming_the_comment(people, asked, monkeypatch):
    records = AuditRecord.objects.count()
    monkeypatch.setenv("CLI_PASSWORD", "carl-pw")
    with pytest.raises(CommandError, match="comment is missing.*Give it with --comment"):
        call_command("run_action", "--decide", str(asked.pk), "--user", "carl", "--reject",
                     stdout=io.StringIO())
    _untouched(asked, records)

    call_command("run_action", "--decide", str(asked.pk), "--user", "carl", "--reject",
                 "--comment", "not fraud after all", stdout=io.StringIO())
    request = ApprovalRequest.objects.get(pk=asked.pk)
    assert (request.status, request.comment) == (RequestStatus.REJECTED,
                                                 "not fraud after all")
    assert Run.objects.get(pk=asked.run_id).status == RunStatus.ATTENTION


def test_a_comment_longer_than_a_person_may_write_is_refused_on_every_path(
        people, asked, monkeypatch):
    from runs.machine.storable import PERSON_TEXT_MAX

    records = AuditRecord.objects.count()
    too_long = "x" * (PERSON_TEXT_MAX + 1)
    limit = f"{PERSON_TEXT_MAX + 1:,} characters, at most {PERSON_TEXT_MAX:,}"
    monkeypatch.setenv("CLI_PASSWORD", "carl-pw")
    with pytest.raises(CommandError, match=limit):
        call_command("run_action", "--decide", str(asked.pk), "--user", "carl", "--reject",
                     "--comment", too_long, stdout=io.StringIO())
    for approved in (True, False):
        with pytest.raises(DecisionRefused, match=limit):
            decide(asked.pk, user=people[1], approved=approved, decision_id=uuid.uuid4(),
                   comment=too_long)
    _untouched(asked, records)
