"""The console, the API and the command line are three doors to one table of operator
actions (runs.operator.actions.ACTIONS) and one function that takes them
(approvals.operator_actions.act). Asked the same question, they give the same answer: for
each run state below and each action of the table, the same actions offered (the run page's
forms, the API's `operator_actions`, show_run's list and run_action's own list); and, taking
the action with the same input, the same outcome (done, a second person asked, or refused
with nothing written), in the same words, leaving the same run state, the same audit
records (action, actor, reason, data keys) and the same approval requests. An action's
input is held to the same rules at each door, and so is a bulk job's reason.

The runs are made by the test workflows and a real worker pass (tests.workflows); an
action that changes its run is taken on a fresh run in that state by each door."""

import io
import json
import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.test import Client

from api.tokens import token_create
from approvals.models import ApprovalRequest, BulkJob
from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import PermanentError
from runs.models import Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("test")
WORKFLOWS = ["test-orders", "test-approval", "test-payment-wait", "test-sleepy",
             "test-charge-then-wait"]


# --- runs in each state a person meets ------------------------------------------------------

def _advanced(run: Run, passes: int = 6) -> Run:
    for _ in range(passes):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status != RunStatus.QUEUED:
            break
    return run


def queued(script):
    return new_run(wake=False)


def failed_write(script):
    """In attention: create-task failed permanently; fetch and classify succeeded."""
    script.plan["create-task"] = [PermanentError("403 from tracker")]
    return _advanced(new_run(wake=False))


def unknown_write(script):
    """In attention with create-task's outcome unknown (it may have happened)."""
    run = failed_write(script)
    return place(run, status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.UNKNOWN})


def completed(script):
    return _advanced(new_run(wake=False))


def failed_high_impact_write(script):
    """In attention: post-ledger (high impact) failed permanently after create-task (low
    impact, with an undo) succeeded."""
    script.plan["post-ledger"] = [PermanentError("400 from ledger")]
    return _advanced(new_run(wake=False))


def charged_then_waiting(script):
    """Waiting for an event after a high-impact charge: ending or undoing the run takes a
    second person (four eyes)."""
    return _advanced(new_run("test-charge-then-wait", wake=False))


def terminated(script):
    run = failed_write(script)
    return transitions.terminate(run.pk, actor=SYSTEM, reason="set up")


def ended_unsettled(script):
    """Terminated by a person while create-task's outcome was unknown: in attention until
    it is settled."""
    run = unknown_write(script)
    return transitions.terminate(run.pk, actor=SYSTEM, reason="set up")


def compensation_paused(script):
    """Compensating, paused at the undo of the high-impact charge."""
    run = charged_then_waiting(script)
    transitions.compensate(run.pk, actor=SYSTEM, reason="set up",
                           approved_by=Actor.system("second"))
    return _advanced(Run.objects.get(pk=run.pk))


def waiting_for_approval(script):
    return _advanced(new_run("test-approval", wake=False))


def waiting_for_event(script):
    return _advanced(new_run("test-payment-wait", wake=False))


def sleeping(script):
    return _advanced(new_run("test-sleepy", wake=False))


STATES = {f.__name__: f for f in (
    queued, failed_write, unknown_write, completed, failed_high_impact_write,
    charged_then_waiting, terminated, ended_unsettled, compensation_paused,
    waiting_for_approval, waiting_for_event, sleeping)}


# --- the three doors ------------------------------------------------------------------------

@pytest.fixture
def doors(db, settings):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    console = Client()
    console.force_login(olga)
    _, plaintext = token_create(name="erp", workflows=WORKFLOWS, acting_user=olga)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return Doors(olga, console, api)


@dataclass
class Answer:
    outcome: str  # done, asked (a second person must agree), refused
    words: str  # what the person is told, the run's id and key written as RUN and KEY
    status: str
    records: list
    requests: list


@dataclass
class Doors:
    user: User
    console: Client
    api: Client

    # What each door offers on `run` now.
    def offered(self, run: Run) -> dict[str, set[str]]:
        page = self.console.get(f"/runs/{run.pk}/").content.decode()
        forms = set(re.findall(rf'action="/runs/{run.pk}/([a-z_]+)/"', page))
        api = {a["name"] for a in self.api.get(f"/api/runs/{run.pk}").json()["operator_actions"]}
        shown = json.loads(command_output("show_run", str(run.pk), "--json"))
        listed = json.loads(command_output("run_action", str(run.pk), "--user", "olga", "--json"))
        return {"console": forms, "api": api,
                "show_run": {a["name"] for a in shown["operator_actions"]},
                "run_action": {a["action"] for a in listed if a["offered"]}}

    # Each door takes `action` on `run` with `given`, and tells what it did in its words.
    def console_takes(self, run, action, given) -> str:
        seen = Run.objects.get(pk=run.pk).audit_seq
        # Only this action's message: the earlier ones were read (as its page reads them).
        self.console.cookies.pop("messages", None)
        response = self.console.post(f"/runs/{run.pk}/{action}/",
                                     {**given, "seen": str(seen)})
        assert response.status_code == 302, response.content
        said = [str(m) for m in get_messages(response.wsgi_request)]
        assert len(said) == 1, said
        return said[0].removeprefix(f"{ACTIONS[action].label} was not done: ")

    def api_takes(self, run, action, given) -> str:
        response = self.api.post(f"/api/runs/{run.pk}/actions/{action}", given,
                                 content_type="application/json")
        assert response.status_code in (200, 202, 400, 409, 422), response.content
        body = response.json()
        return body["message"] if response.status_code in (200, 202) else body["detail"]

    def cli_takes(self, run, action, given) -> str:
        options = []
        for name, value in given.items():
            if name == "call":
                name, value = "call", f"{given['step']}:{value}"
            options += [f"--{name.replace('_', '-')}", value]
        try:
            out = command_output("run_action", str(run.pk), action, "--user", "olga", "--json",
                       *options)
        except CommandError as exc:
            return str(exc).removeprefix(f"{ACTIONS[action].label} was not done: ")
        return json.loads(out)["message"]


def command_output(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _door_words(words: str) -> str:
    """The words every door shares, without what a door adds of its own: the command line
    names its options (--step, "Give it with --evidence.") and the API says that nothing was
    done where its status code alone would not."""
    words = re.sub(r" Give it with --[^.]*\.$", "", words).rstrip(".")
    words = words.removesuffix("; nothing was done")
    return re.sub(r"^--(?=[a-z])", "", words)


def with_run_id_said(run_id: int, words: str) -> str:
    """`words` with the run's id written RUN, where it stands alone: not within a tool
    call's id ("9.9", TURN.INDEX), which a run's id may equal by chance."""
    return re.sub(rf"(?<![\w.]){run_id}(?!\w|\.\d)", "RUN", words)


def _answer(run: Run, words: str, seq_before: int, requests_before: int) -> Answer:
    run = Run.objects.get(pk=run.pk)
    records = [(r.action, r.step_name, r.actor_kind, r.actor_label, r.reason,
                sorted(r.data)) for r in AuditRecord.objects.filter(
        run=run, seq__gt=seq_before, actor_kind="user").order_by("seq")]
    requests = [(a.kind, a.action, a.target_step, a.status, a.snapshot.get("reason"))
                for a in ApprovalRequest.objects.filter(run=run).order_by("pk")
                [requests_before:]]
    outcome = "asked" if requests else "done" if run.audit_seq != seq_before else "refused"
    words = with_run_id_said(run.pk, _door_words(words).replace(run.business_key, "KEY"))
    for approval in ApprovalRequest.objects.filter(run=run):
        words = re.sub(rf"\brequest {approval.pk}\b", "request N", words)
    return Answer(outcome, words, run.status, records, requests)


def ask(doors: Doors, door: str, run: Run, action: str, given: dict) -> Answer:
    seq = Run.objects.get(pk=run.pk).audit_seq
    requests = ApprovalRequest.objects.filter(run=run).count()
    words = getattr(doors, f"{door}_takes")(run, action, given)
    return _answer(run, words, seq, requests)


def input_for(action: str, run: Run) -> dict:
    """The same input for every door: a reason, the first step the action may be aimed at
    (or the run's first step, where none may), a hand verdict, an event's payload."""
    spec = ACTIONS[action]
    steps = list(Step.objects.filter(run=run).order_by("position"))
    given = {"reason": "INC-7 checked with finance"}
    if spec.takes_step:
        eligible = spec.eligible_steps(run, steps)
        given["step"] = (eligible or steps)[0].name
    if spec.takes_call:
        given["call"] = "1.0"
    if action in ("reconcile", "reconcile_tool_call"):
        given |= {"mode": "not_found", "evidence": "no task in the tracker"}
    if action == "event_received":
        given["evidence"] = json.dumps({"amount": 12, "reference": "PAY-1"})
    return given


DOORS = ("console", "api", "cli")


@pytest.mark.parametrize("state", STATES)
def test_each_door_offers_and_answers_each_action_alike(doors, script, state):
    build = STATES[state]
    probe = build(script)
    offered = doors.offered(probe)
    # The run page draws the tool-call actions on the call, and this workflow has none.
    assert offered["console"] == offered["api"] == offered["show_run"] \
        == offered["run_action"], offered
    for action in ACTIONS:
        given = input_for(action, probe)
        if action not in offered["api"]:
            # Refused: nothing is written, so every door is asked about the same run.
            answers = {door: ask(doors, door, probe, action, given) for door in DOORS}
        else:
            answers = {}
            for door in DOORS:
                script.reset()
                run = build(script)
                answers[door] = ask(doors, door, run, action, input_for(action, run))
        first = answers["api"]
        for door, answer in answers.items():
            assert answer == first, (state, action, door, answers)
        if action not in offered["api"]:
            assert first.outcome == "refused", (state, action, first)


# --- the same input rules at each door ------------------------------------------------------

INPUTS = {
    "reason empty": ("failed_write", "resume", {"reason": ""}),
    "reason blank": ("failed_write", "resume", {"reason": "   "}),
    "reason padded": ("failed_write", "resume", {"reason": "  INC-7  "}),
    "reason ends in a control character": ("failed_write", "resume", {"reason": "INC-7\x0b"}),
    "reason with an escape": ("failed_write", "resume", {"reason": "INC-7 \x1b[31m"}),
    "reason too long": ("failed_write", "resume", {"reason": "x" * 2001}),
    "step missing where one may be": ("failed_write", "retry_step", {"reason": "INC-7"}),
    "step missing where none may be": ("queued", "retry_step", {"reason": "INC-7"}),
    "step unknown": ("failed_write", "retry_step", {"reason": "INC-7", "step": "nope"}),
    "step longer than a step's name may be": ("failed_write", "retry_step", {
        "reason": "INC-7", "step": "s" * 201}),
    "step padded": ("failed_write", "retry_step", {"reason": "INC-7", "step": " create-task "}),
    "step not read": ("failed_write", "resume", {"reason": "INC-7", "step": "fetch"}),
    "call missing": ("failed_write", "retry_tool_call", {"reason": "INC-7",
                                                         "step": "create-task"}),
    "call of no agent step": ("failed_write", "retry_tool_call", {
        "reason": "INC-7", "step": "create-task", "call": "1.0"}),
    "evidence missing by hand": ("failed_write", "reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "not_found"}),
    "evidence blank by hand": ("failed_write", "reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "not_found", "evidence": "  "}),
    "remote reference missing where found": ("failed_write", "reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "found", "evidence": "seen"}),
    "remote reference on two lines": ("failed_write", "reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "found", "remote_ref": "T-1\nT-2",
        "evidence": "seen"}),
    "remote reference longer than a record keeps": ("failed_write", "reconcile", {
        "reason": "INC-7", "step": "create-task", "mode": "found", "remote_ref": "T" * 301,
        "evidence": "seen"}),
    "event payload blank": ("waiting_for_event", "event_received", {
        "reason": "INC-7", "evidence": "  "}),
    "event payload padded": ("waiting_for_event", "event_received", {
        "reason": "INC-7", "evidence": ' {"amount": 3, "reference": "P"} '}),
}


@pytest.mark.parametrize("case", INPUTS)
def test_each_door_holds_an_actions_input_to_the_same_rules(doors, script, case):
    state, action, given = INPUTS[case]
    answers = {}
    for door in DOORS:
        script.reset()
        run = STATES[state](script)
        answers[door] = ask(doors, door, run, action, given)
    first = answers["api"]
    for door, answer in answers.items():
        assert answer == first, (case, door, answers)


# --- a bulk job's reason, at each door ------------------------------------------------------

BULK_REASONS = {"empty": "", "blank": "   ", "too long": "x" * 2001,
                "too long once the job's mark is added": "x" * 1995,
                "with an escape": "INC-7 \x1b[31m", "padded": "  INC-7  "}


def _bulk_started(doors: Doors, door: str, reason: str) -> str:
    """Start a bulk terminate of test-orders at `door`; what the door said."""
    if door == "console":
        doors.console.cookies.pop("messages", None)
        response = doors.console.post("/runs/bulk/jobs/", {
            "action": "terminate", "workflow": "test-orders", "reason": reason})
        said = [str(m) for m in get_messages(response.wsgi_request)]
        return said[0].removeprefix("Nothing was started: ") if said else "started"
    if door == "api":
        response = doors.api.post("/api/bulk", {
            "action": "terminate", "reason": reason, "filters": {"workflow": "test-orders"}},
            content_type="application/json")
        if response.status_code in (200, 202):
            return "started"
        assert response.status_code == 422, response.content
        return response.json()["detail"].removesuffix("; nothing was started")
    try:
        command_output("bulk_action", "start", "terminate", "--user", "olga", "--workflow",
             "test-orders", "--reason", reason)
    except CommandError as exc:
        return str(exc)
    return "started"


@pytest.mark.parametrize("case", BULK_REASONS)
def test_each_door_holds_a_bulk_jobs_reason_to_the_same_rule(doors, script, case):
    failed_write(script)
    answers = {}
    for door in DOORS:
        said = _bulk_started(doors, door, BULK_REASONS[case])
        answers[door] = (said, list(BulkJob.objects.values_list("reason", flat=True)))
        BulkJob.objects.all().delete()
    assert answers["console"] == answers["api"] == answers["cli"], answers
