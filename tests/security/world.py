"""The world every case of the security matrix runs against: one user per role, each with
its own browser (a test client that enforces CSRF and holds a session and a csrftoken
cookie), an API token, a run waiting for an approval with its open request, and a run in
each state the operator actions need. Built through the real transitions and factories,
on PostgreSQL, once per module (see conftest.py); every test rolls back to it."""

import itertools
import json
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Group, Permission, User
from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.test import Client
from django.test.client import ClientHandler
from django.utils import timezone
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from approvals.models import ApprovalRequest
from approvals.tasks import sweep
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine.keys import tool_call_key, tool_compensation_key
from runs.machine.transitions.agent_calls import args_hash
from runs.models import (
    AgentTurn,
    AttentionReason,
    ErrorClass,
    Run,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
    Workflow,
)
from runs.operator.actions import ACTIONS
from tests.factories import new_run, place

PASSWORD = "matrix-pw"
_keys = itertools.count(1)

# The run states the operator actions need: each action is tried on a run where it can
# succeed, so that a refusal is a refusal of the request, not of the run's state.
SCENARIOS = {
    # An effect failed: resume, reconcile, retry or ask the model again, cancel, terminate.
    "failed_write": dict(status=RunStatus.ATTENTION,
                         attention_reason=AttentionReason.PERMANENT_ERROR,
                         step_statuses={"fetch": StepStatus.SUCCEEDED,
                                        "classify": StepStatus.SUCCEEDED,
                                        "create-task": StepStatus.FAILED}),
    # A low-impact effect took place, the next failed: compensate (no second person).
    "compensable": dict(status=RunStatus.ATTENTION,
                        attention_reason=AttentionReason.PERMANENT_ERROR,
                        step_statuses={"fetch": StepStatus.SUCCEEDED,
                                       "classify": StepStatus.SUCCEEDED,
                                       "create-task": StepStatus.SUCCEEDED,
                                       "post-ledger": StepStatus.FAILED}),
    # A compensation paused at the undo of the high-impact ledger entry: confirm it.
    "paused_undo": dict(status=RunStatus.ATTENTION,
                        attention_reason=AttentionReason.COMPENSATION_PAUSED,
                        step_statuses={"fetch": StepStatus.SUCCEEDED,
                                       "classify": StepStatus.SUCCEEDED,
                                       "create-task": StepStatus.SUCCEEDED,
                                       "post-ledger": StepStatus.SUCCEEDED}),
    "terminated": dict(status=RunStatus.TERMINATED,
                       step_statuses={"fetch": StepStatus.SUCCEEDED}),
}

# Which scenario each operator action is tried on. A new action in runs.operator.actions.ACTIONS
# fails test_every_operator_action_is_tried_on_a_run_where_it_can_succeed until it is
# added here.
ACTION_SCENARIOS = {
    "resume": "failed_write",
    "reconcile": "failed_write",
    "retry_step": "failed_write",
    "ask_again": "failed_write",
    "compensate": "compensable",
    "confirm_compensation": "paused_undo",
    "cancel": "failed_write",
    "terminate": "failed_write",
    "reopen": "terminated",
    "event_received": "waiting_event",
    "skip_event": "waiting_event",
    "wake_timer": "sleeping",
    "rerun_from_step": "failed_write",
    "reconcile_tool_call": "unknown_tool_call",
    "retry_tool_call": "failed_tool_call",
    "compensate_tool_call": "done_tool_call",
    "cancel_tool_call": "pending_tool_call",
}

# The runs that wait on the world, brought there by the executor as a worker brings them
# (the step's wait is set up by the executor, not by a field placed by hand).
WAITING_SCENARIOS = {
    # Waits for the payment provider's payment.settled: deliver it by hand, or skip it.
    "waiting_event": "test-payment-wait",
    # Sleeps an hour on a durable timer: wake it now.
    "sleeping": "test-sleepy",
}

# The payload the waiting_event run's step accepts (tests.workflows.PaymentSettled).
EVENT_PAYLOAD = {"amount": 120, "reference": "PSP-MATRIX"}
# The signed-webhook source the world configures (RUNS_EVENT_SOURCES, see conftest.py):
# the matrix never signs, so the refusals are of the signature, not of an unknown source.
WEBHOOK_SOURCE = "psp"
EVENT_SOURCES = {WEBHOOK_SOURCE: {"secret": "matrix-webhook-secret",
                                  "workflows": [WAITING_SCENARIOS["waiting_event"]]}}

# What an operator action's form needs beyond the fields every action gets.
ACTION_FIELDS = {
    # The event's payload goes in the evidence field, as JSON the step's schema accepts.
    "event_received": {"evidence": json.dumps(EVENT_PAYLOAD)},
}

# The agent runs the actions on one tool call need: (step status, the call's status).
AGENT_SCENARIOS = {
    "unknown_tool_call": (StepStatus.UNKNOWN, ToolCallStatus.UNKNOWN,
                          AttentionReason.UNKNOWN_OUTCOME),
    "failed_tool_call": (StepStatus.FAILED, ToolCallStatus.FAILED,
                         AttentionReason.PERMANENT_ERROR),
    "done_tool_call": (StepStatus.FAILED, ToolCallStatus.SUCCEEDED,
                       AttentionReason.PERMANENT_ERROR),
    "pending_tool_call": (StepStatus.FAILED, ToolCallStatus.PENDING,
                          AttentionReason.PERMANENT_ERROR),
}

# The workflow the per-workflow operator may act on: not the one the runs belong to.
OTHER_WORKFLOW = "test-saga"


@dataclass
class World:
    users: dict[str, User | None]
    sessions: dict[str, str | None]  # role -> session key
    csrf_cookies: dict[str, str]  # role -> the csrftoken cookie (the secret)
    csrf: dict[str, str]  # role -> the token a page puts in its forms
    token_plaintext: str
    approval: ApprovalRequest
    runs: dict[str, Run]
    clients: dict[str, Client] | None = None

    def browse(self) -> "World":
        """Fresh browsers for a test: a request of the last test may have signed one out,
        or in as someone else."""
        self.clients = {role: _client(self, role) for role in self.sessions}
        return self

    def run(self, scenario: str = "failed_write") -> Run:
        return self.runs[scenario]

    def fresh(self, scenario: str = "failed_write") -> Run:
        return Run.objects.get(pk=self.runs[scenario].pk)

    def steps(self, scenario: str) -> list[Step]:
        return list(Step.objects.filter(run=self.runs[scenario]).order_by("position"))

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{next(_keys)}"


def _user(username: str, *groups: str, **flags) -> User:
    user = User.objects.create_user(username, email=f"{username}@example.com",
                                    password=PASSWORD, **flags)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    return user


def _session(user: User) -> str:
    """A session as login() leaves it."""
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return session.session_key


def _csrf() -> tuple[str, str]:
    """(the csrftoken cookie, the masked token a page built from it puts in its forms)."""
    request = HttpRequest()
    token = get_token(request)
    return request.META["CSRF_COOKIE"], token


_handler: ClientHandler | None = None


def _client(world: World, role: str) -> Client:
    """A client that enforces CSRF like a browser, with the role's cookies."""
    global _handler
    extra = {"HTTP_AUTHORIZATION": f"Bearer {world.token_plaintext}"} \
        if role == "api_token" else {}
    client = Client(enforce_csrf_checks=True, **extra)
    # One handler for every client: loading the middleware (WhiteNoise indexes the static
    # files) costs more than a whole test.
    _handler = _handler or client.handler
    client.handler = _handler
    if world.sessions[role] is not None:
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[role]
    client.cookies[settings.CSRF_COOKIE_NAME] = world.csrf_cookies[role]
    return client


def _agent_run(step_status: str, call_status: str, reason: str) -> Run:
    """A test-agent run in attention whose one tool call (turn 1, call 0) is as given."""
    run = place(new_run("test-agent"), status=RunStatus.ATTENTION, attention_reason=reason,
                step_statuses={"assist": step_status})
    step = Step.objects.get(run=run, name="assist")
    now = timezone.now()
    arguments = {"text": "hello"}
    AgentTurn.objects.create(step=step, index=1, created_at=now, tool_calls=[
        {"id": "call-1", "name": "write-note", "arguments": '{"text": "hello"}'}])
    key = tool_call_key(run.workflow_name, run.business_key, "assist", 1, 1, 0, "write-note")
    ToolCall.objects.create(
        step=step, turn=1, index=0, call_id="call-1", tool="write-note", kind="write",
        impact="low", arguments=arguments, args_hash=args_hash(arguments), status=call_status,
        idempotency_key=key, compensation_key=tool_compensation_key(key), attempt=1,
        remote_ref="NOTE-1" if call_status == ToolCallStatus.SUCCEEDED else "",
        error_class=ErrorClass.PERMANENT if call_status == ToolCallStatus.FAILED else "",
        error_message="refused" if call_status == ToolCallStatus.FAILED else "",
        started_at=now, updated_at=now)
    return run


def _waiting_run(workflow: str) -> Run:
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk)


def build_world(roles) -> World:
    ensure_roles(Group, Permission)
    users: dict[str, User | None] = {
        "anonymous": None,
        "api_token": None,
        "auditor": _user("aude", "auditors"),
        "approver": _user("ann", "approvers"),
        "other_operator": _user("otto"),
        "operator": _user("olga", "operators"),
        "superuser": _user("root", is_staff=True, is_superuser=True),
    }
    # Every operator permission, on another workflow's row only (django-guardian).
    other, _ = Workflow.objects.get_or_create(name=OTHER_WORKFLOW)
    for codename in {"view_runs", *(a.permission for a in ACTIONS.values())}:
        assign_perm(f"runs.{codename}", users["other_operator"], other)

    # test-orders for starting runs; the event-waiting workflow for sending it events.
    _, plaintext = token_create(name="matrix-erp",
                                workflows=["test-orders", WAITING_SCENARIOS["waiting_event"]])

    waiting = new_run("test-approval")
    executor.advance_run(waiting.pk, worker="w1")
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.WAITING
    # The approvals sweeper (as Celery beat runs it) opens the request and notifies.
    assert sweep()["opened"] == 1
    approval = ApprovalRequest.objects.get(run=waiting, status="pending")

    runs = {name: place(new_run(), **spec) for name, spec in SCENARIOS.items()}
    runs.update({name: _agent_run(*spec) for name, spec in AGENT_SCENARIOS.items()})
    runs.update({name: _waiting_run(workflow) for name, workflow in WAITING_SCENARIOS.items()})
    csrf = {role: _csrf() for role in roles}
    return World(users=users,
                 sessions={role: _session(users[role]) if users[role] else None
                           for role in roles},
                 csrf_cookies={role: cookie for role, (cookie, _) in csrf.items()},
                 csrf={role: token for role, (_, token) in csrf.items()},
                 token_plaintext=plaintext, approval=approval, runs=runs)
