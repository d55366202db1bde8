"""A run waiting for a person's approval (an attempt of a step with the stop verdict, an
agent's tool call with it, an approval step) is neither offered nor taken Resume, by the
transition itself, so at the console, the API and the command line alike. Resume would send
nothing: the approval still holds the effect (the run would wait for the same approval
again), but it reads as "continue", records a resume by a person, and leaves a decision
made meanwhile unapplied until the run waits again. The refusal says what the run waits
for and that its approval request decides it. A run held after its approval timed out is
still resumed: that is how it is asked again."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.test import Client

from api.tokens import token_create
from approvals import decisions, requests
from approvals.models import ApprovalRequest, RequestStatus
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from demo.sandbox.models import LedgerEntry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, Run, RunStatus, StepStatus, ToolCallStatus
from runs.operator.actions import ACTIONS, offered
from tests.agent_runs import SMALL, advance
from tests.factories import SYSTEM
from tests.receiver import ScriptedReceiver
from tests.workflows import stop_receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _approval_settings(settings, empty_broker):
    settings.APPROVALS_BASE_URL = "http://testserver"
    settings.APPROVAL_LINK_MAX_AGE = 3 * 24 * 3600


@pytest.fixture
def receiver():
    with ScriptedReceiver() as server:
        stop_receiver.url = server.url
        yield server
    stop_receiver.url = ""


@pytest.fixture
def operator(db, monkeypatch):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    return user


def _paid(receiver) -> int:
    return len(receiver.sent("POST", "/pay"))


def _offers(run: Run) -> list[str]:
    return [a.name for a in offered(run, list(run.steps.order_by("position")))]


def _waiting_for_its_approval(order: str) -> tuple[Run, ApprovalRequest]:
    """A run whose stop-verdict payment waits for a person before its first attempt, with
    its approval request opened to the approver pia."""
    approver = User.objects.create_user("pia", password="pw")
    approver.groups.add(Group.objects.get_or_create(name="stop-approvers")[0])
    run, _ = transitions.start_run(workflow="test-stop-verdict", business_key=order,
                                   input={"order": order, "amount": 120}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    assert requests.open_pending_requests() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert run.steps.get(name="pay-unkeyed").status == StepStatus.WAITING
    return run, ApprovalRequest.objects.get(run=run)


def _refusal_words(run: Run) -> str:
    return (f"run {run.pk} waits for a person's approval of attempt 1 of pay-unkeyed "
            "(the stop verdict: a person approves each attempt): its approvers decide it "
            "from its approval request, and their decision moves the run on. Resumed, it "
            "would only wait for the same approval again; to stop the run instead, cancel "
            "or terminate it")


def test_resume_of_a_stop_verdict_attempt_waiting_for_its_approval_is_refused_and_pays_nothing(
        receiver, operator):
    run, approval = _waiting_for_its_approval("wait-1")

    assert "resume" not in _offers(run)
    assert ACTIONS["resume"].refusal(run, list(run.steps.all())) == _refusal_words(run)
    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.resume(run.pk, actor=Actor.for_user(operator), reason="push it on")
    assert str(refused.value) == _refusal_words(run)

    # Nothing was written, nothing is due, nothing was paid; the request still stands.
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.audit_seq) == (RunStatus.WAITING, run.audit_seq)
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.RESUMED).exists()
    assert executor.advance_run(run.pk, worker="w1") is None
    assert _paid(receiver) == 0
    approval.refresh_from_db()
    assert approval.status == RequestStatus.PENDING

    # The approval request is what moves it on: approved, the attempt is paid once.
    outcome = decisions.decide(approval.pk, user=User.objects.get(username="pia"),
                               approved=True,
                               decision_id="00000000-0000-0000-0000-000000000001")
    assert outcome.recorded, outcome.message
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _paid(receiver) == 1


def test_the_console_the_api_and_the_command_line_neither_offer_nor_take_it(receiver, operator):
    run, approval = _waiting_for_its_approval("wait-2")
    expected = f"Resume was not done: {_refusal_words(run)}"

    shown = io.StringIO()
    call_command("show_run", str(run.pk), "--json", stdout=shown)
    assert "resume" not in [a["name"] for a in json.loads(shown.getvalue())["operator_actions"]]
    listed = io.StringIO()
    call_command("run_action", str(run.pk), "--user", "olga", stdout=listed)
    assert dict(line.split(None, 1) for line in listed.getvalue().splitlines())["resume"] \
        == f"-: {_refusal_words(run)}"

    with pytest.raises(CommandError) as cli:
        call_command("run_action", str(run.pk), "resume", "--user", "olga",
                     "--reason", "push it on", stdout=io.StringIO())
    assert str(cli.value) == expected

    client = Client()
    client.force_login(operator)
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    assert f'action="/runs/{run.pk}/resume/"' not in page.content.decode()
    posted = client.post(f"/runs/{run.pk}/resume/", {"reason": "push it on",
                                                      "seen": str(run.audit_seq)})
    assert posted.status_code == 302, posted.content
    assert [str(m) for m in get_messages(posted.wsgi_request)] == [expected]

    _, token = token_create(name="erp", workflows=["test-stop-verdict"], acting_user=operator)
    api = Client().post(f"/api/runs/{run.pk}/actions/resume", {"reason": "push it on"},
                        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.status_code == 409, api.content
    assert api.json()["detail"] == _refusal_words(run)  # the address names the action
    shown_by_api = Client().get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert "resume" not in [a["name"] for a in shown_by_api.json()["operator_actions"]]

    # No door wrote anything or sent anything.
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.audit_seq) == (RunStatus.WAITING, run.audit_seq)
    assert executor.advance_run(run.pk, worker="w1") is None
    assert _paid(receiver) == 0
    approval.refresh_from_db()
    assert approval.status == RequestStatus.PENDING


def test_an_agent_tool_call_waiting_for_its_stop_verdict_approval_is_not_resumed(live_sandbox):
    operator = User.objects.create_superuser("root", password="pw")
    data = {"tenant": "tenant-42", "invoice_number": SMALL,
            "requester_email": "requester@example.com", "notes": ""}
    run, _ = transitions.start_run(workflow="test-triage-stop-verdict",
                                   business_key=f"wait:{SMALL}", input=data, actor=SYSTEM,
                                   wake=False)
    run = advance(run)
    (call,) = transitions.waiting_tool_calls(run)
    assert requests.open_pending_requests() == 1
    run.refresh_from_db()

    assert "resume" not in _offers(run)
    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.resume(run.pk, actor=Actor.for_user(operator), reason="push it on")
    assert str(refused.value).startswith(
        f"run {run.pk} waits for a person's approval of a tool call of triage: its approvers "
        "decide it from its approval request")

    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.audit_seq) == (RunStatus.WAITING, run.audit_seq)
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING
    assert LedgerEntry.objects.count() == 0


def test_an_approval_step_waiting_is_not_resumed_but_one_timed_out_is(operator, script):
    run, _ = transitions.start_run(workflow="test-approval", business_key="wait-3",
                                   input={"order": "wait-3", "amount": 5}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING

    assert "resume" not in _offers(run)
    with pytest.raises(TransitionNotAllowed) as refused:
        transitions.resume(run.pk, actor=Actor.for_user(operator), reason="push it on")
    assert str(refused.value).startswith(
        f"run {run.pk} waits for a person's approval of approve: its approvers decide it "
        "from its approval request")

    # Held for a person once nobody decided in time: Resume is how it is asked again.
    transitions.approval_timed_out(run.pk, step_name="approve", actor=SYSTEM,
                                   reason="nobody decided in 3 days")
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.APPROVAL_TIMED_OUT
    assert "resume" in _offers(run)
    transitions.resume(run.pk, actor=Actor.for_user(operator), reason="chased the approvers")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert run.steps.get(name="approve").status == StepStatus.WAITING
