"""A NUL in any field of an operator action's input, or a control character in a field that
names one thing (the step, the tool call, the remote reference), is refused by one rule
(runs.operator.action_input.field_refused, which ActionInput applies) in the same words
naming the field at the console, the API and the command line: not the API's "the request
does not match its schema", nor the command line's "--reason: ...; give it as UTF-8 text",
nor "the call is TURN.INDEX" for a call holding an escape. Nothing is written. A decision's
comment holding a NUL, an escape, or too long is refused alike by its three doors too, by
the decision's own rule (approvals.decisions.decision_refusal), and nothing is recorded."""

import io
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client

from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    DOORS,
    STATES,
    WORKFLOWS,
    ask,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

REFUSED = {
    "a NUL in the reason": ("resume", {"reason": "INC\x00-7"}, "reason"),
    "a NUL in the step": ("retry_step", {"reason": "INC-7", "step": "create\x00-task"}, "step"),
    "an escape in the step": ("retry_step", {"reason": "INC-7", "step": "create\x1b-task"},
                              "step"),
    "a NUL in the tool call": ("retry_tool_call", {
        "reason": "INC-7", "step": "create-task", "call": "1.\x000"}, "tool call"),
    "a control character in the tool call": ("retry_tool_call", {
        "reason": "INC-7", "step": "create-task", "call": "1.\x010"}, "tool call"),
    "a NUL in the evidence": ("reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "not_found", "evidence": "a\x00b"},
        "evidence"),
    "a NUL in the remote reference": ("reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "found", "remote_ref": "T\x00-1",
        "evidence": "seen"}, "remote reference"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_each_door_refuses_it_in_the_same_words_naming_the_field(doors, script, case):  # noqa: F811
    action, given, field = REFUSED[case]
    answers = {}
    for door in DOORS:
        script.reset()
        run = STATES["failed_write"](script)
        answers[door] = ask(doors, door, run, action, given)
    first = answers["api"]
    for door, answer in answers.items():
        assert answer == first, (case, door, answers)
    assert first.outcome == "refused" and first.records == [] and first.requests == []
    assert first.words.startswith(f"{field}: "), first.words
    assert "NUL" in first.words or "control characters" in first.words, first.words


# --- a decision's comment -------------------------------------------------------------------

COMMENTS = {
    "a NUL": ("checked\x00 with finance",
              "The comment is not text a record can keep (NUL characters cannot be stored)."),
    "an escape": ("checked \x1b[31m with finance",
                  "The comment is text with the control character U+001B, where only line "
                  "breaks and tabs may be."),
    "too long": ("x" * 2001, "The comment is 2,001 characters, at most 2,000."),
}


@pytest.fixture
def asked(doors, script):  # noqa: F811
    """A four-eyes request olga asked for (terminate after a high-impact charge), and pete,
    another operator, who may decide it."""
    run = STATES["charged_then_waiting"](script)
    response = doors.api.post(f"/api/runs/{run.pk}/actions/terminate",
                              {"reason": "INC-7 duplicate order"},
                              content_type="application/json")
    assert response.status_code == 202, response.content
    pete = User.objects.create_user("pete", password="pw")
    pete.groups.add(Group.objects.get(name="operators"))
    return ApprovalRequest.objects.get(pk=response.json()["approval_request"]["id"]), pete


def _recorded(approval):
    approval.refresh_from_db()
    return (approval.status, approval.decided_by_id,
            AuditRecord.objects.filter(run_id=approval.run_id).count(),
            Run.objects.get(pk=approval.run_id).status)


@pytest.mark.parametrize("case", COMMENTS)
@pytest.mark.parametrize("approve", [True, False])
def test_a_comment_no_record_may_keep_is_refused_alike_by_each_door(asked, approve, case):
    COMMENT, SAID = COMMENTS[case]  # noqa: N806
    approval, pete = asked
    before = _recorded(approval)
    assert before[0] == RequestStatus.PENDING

    console = Client()
    console.force_login(pete)
    page = console.post(f"/approvals/{approval.pk}/decide/", {
        "decision": "approve" if approve else "reject", "comment": COMMENT,
        "decision_id": str(uuid.uuid4())})
    assert page.status_code == 400
    assert f"{SAID} Nothing was recorded." in page.content.decode()

    _, plaintext = token_create(name="pete", workflows=WORKFLOWS, acting_user=pete)
    response = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}").post(
        f"/api/approvals/{approval.pk}/decision",
        {"approve": approve, "decision_id": str(uuid.uuid4()), "comment": COMMENT},
        content_type="application/json")
    assert response.status_code == 422, response.content
    assert response.json()["detail"] == SAID
    assert [e["loc"] for e in response.json()["errors"]] == [["comment"]]

    with pytest.raises(CommandError) as refused:
        call_command("run_action", "--decide", str(approval.pk), "--user", "pete", "--comment",
                     COMMENT, *([] if approve else ["--reject"]), stdout=io.StringIO())
    assert str(refused.value) == f"{SAID} Give it with --comment. Nothing was decided."

    assert _recorded(approval) == before
