"""One effect machine: a step's call and an agent's tool call go through the same rules
(runs.machine.transitions.effects). Each rule is shown on both kinds of effect, driven through
their own transitions by hand, and the step and tool-call modules are checked to keep no
copy of a rule of their own."""

import inspect
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Found, LookupFailed, Undetermined
from runs.machine import transitions
from runs.machine.errors import Classified, EvidenceRequired
from runs.machine.keys import tool_call_key, tool_compensation_key
from runs.machine.transitions import (
    agent_calls,
    agent_compensation,
    agent_operator,
    agent_turns,
    approval_waits,
    compensation,
    effect_rows,
    effects,
    lease_cycle,
    unknown_outcome,
)
from runs.machine.transitions.agent_calls import args_hash
from runs.models import (
    ApprovalWait,
    AttentionReason,
    ErrorClass,
    Run,
    RunStatus,
    Step,
    ToolCall,
    ToolCallStatus,
)
from tests.factories import new_run, place
from tests.workflows import FAST

pytestmark = pytest.mark.django_db

OPERATOR = Actor.system("operator")
TRANSIENT = transitions.Outcome(False, error=Classified(ErrorClass.TRANSIENT, "HTTP 503"))
UNKNOWN = transitions.Outcome(False, error=Classified(ErrorClass.UNKNOWN, "timed out"))
PERMANENT = transitions.Outcome(False, error=Classified(ErrorClass.PERMANENT, "HTTP 400"))
DONE = transitions.Outcome(True, value={}, remote_ref="R-1")


class StepEffect:
    """A write step, recorded through the lease cycle."""

    def __init__(self, workflow="test-effect-step"):
        self.run = new_run(workflow)
        self.lease = None

    def _claim(self):
        if self.lease is None or self.lease.finished:
            run = Run.objects.get(pk=self.run.pk)
            self.lease = transitions.claim_run(run.pk, worker="w1",
                                               now=run.next_wake_at or timezone.now())
        while self.lease.work is not None and self.lease.work.name != self.name:
            # A step before this effect's: done.
            self.lease = transitions.record_outcome(self.lease, self.lease.work, DONE)

    def send(self):
        self._claim()

    def record(self, outcome, lease=None):
        lease = lease or self.lease
        self.lease = transitions.record_outcome(lease, lease.by_name(self.name), outcome)

    def settle(self, verdict):
        self._claim()
        assert self.lease.settle_first
        self.lease = transitions.settle_unknown(self.lease, self.lease.work, verdict)

    name = "note"

    def row(self):
        return Step.objects.get(run=self.run, name=self.name)

    def person_settles(self, verdict, evidence):
        transitions.reconcile(self.run.pk, step_name=self.name, verdict=verdict, actor=OPERATOR,
                              reason="checked", evidence=evidence)


class CallEffect(StepEffect):
    """A tool call of an agent step, recorded through agent_calls."""

    name = "act"

    def __init__(self, workflow="test-effect-call", tool="note"):
        super().__init__(workflow)
        step = Step.objects.get(run=self.run, name="act")
        self.call = ToolCall.objects.create(
            step=step, turn=1, index=0, call_id="c1", tool=tool, kind="write",
            arguments={"text": "hi"}, args_hash=args_hash({"text": "hi"}),
            idempotency_key="k" * 64, updated_at=timezone.now())

    def send(self):
        self._claim()
        begun = agent_calls.begin_tool_call(self.lease, self.lease.by_name("act"), self.call)
        self.call = begun or self.call

    def record(self, outcome, lease=None):
        lease = lease or self.lease
        self.lease = agent_calls.record_tool_outcome(lease, lease.by_name("act"), self.call,
                                                     outcome)

    def settle(self, verdict):
        self._claim()
        self.lease = agent_calls.settle_tool_call(self.lease, self.lease.by_name("act"),
                                                  self.call, verdict)

    def row(self):
        return ToolCall.objects.get(pk=self.call.pk)

    def person_settles(self, verdict, evidence):
        transitions.reconcile_tool_call(self.run.pk, step_name="act", call_ref=self.call.ref,
                                        verdict=verdict, actor=OPERATOR, reason="checked",
                                        evidence=evidence)


KINDS = pytest.mark.parametrize("kind", [StepEffect, CallEffect], ids=["step", "tool_call"])


def _run(effect) -> Run:
    return Run.objects.get(pk=effect.run.pk)


def _unknown(effect):
    """`effect`, sent once, its outcome unknown."""
    effect.send()
    effect.record(UNKNOWN)
    assert effect.row().status == "unknown"
    return effect


def _records(effect, action):
    return list(AuditRecord.objects.filter(run_id=effect.run.pk, action=action).order_by("seq"))


@KINDS
def test_a_transient_error_is_sent_again_within_the_budget_then_the_run_stops(kind):
    effect = kind()
    for attempt in range(1, FAST.maximum_attempts + 1):
        effect.send()
        assert (effect.row().status, effect.row().attempt) == ("running", attempt)
        effect.record(TRANSIENT)
        if attempt < FAST.maximum_attempts:
            run = _run(effect)
            assert effect.row().status == "scheduled" and run.status == RunStatus.WAITING
            assert run.next_wake_at > timezone.now() - timedelta(seconds=5)
    run, row = _run(effect), effect.row()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    assert "retry budget spent after 3 attempts" in run.status_message
    assert (row.status, row.error_class) == ("failed", ErrorClass.EXHAUSTED)
    assert len(_records(effect, "retry_scheduled")) == FAST.maximum_attempts - 1


@pytest.mark.parametrize("kind,workflow", [(StepEffect, "test-effect-saga-step"),
                                           (CallEffect, "test-effect-saga-call")],
                         ids=["step", "tool_call"])
def test_a_permanent_error_undoes_the_completed_steps_where_the_policy_says_so(kind, workflow):
    effect = kind(workflow)
    effect.send()
    effect.record(PERMANENT)
    run = _run(effect)
    assert run.status == RunStatus.COMPENSATING
    assert effect.row().status == "failed"
    (started,) = _records(effect, "compensation_started")
    assert started.reason.startswith("automatic, by policy:") and "HTTP 400" in started.reason
    assert Step.objects.get(run=run, name="reserve").status == "compensating"


@KINDS
def test_an_unknown_outcome_is_looked_up_by_key_and_found_settles_it(kind):
    effect = _unknown(kind())
    # A lookup that errs is a read: asked again after the backoff, within its budget.
    effect.settle(LookupFailed("HTTP 503"))
    assert effect.row().status == "unknown" and effect.row().lookup_failures == 1
    assert _run(effect).status == RunStatus.WAITING
    (again,) = _records(effect, "lookup_retry_scheduled")
    assert again.data["verdict"] == "lookup failed" and again.data["lookup_failures"] == 1
    effect.settle(Found("REF-7", {"ok": True}))
    row = effect.row()
    assert (row.status, row.remote_ref, row.lookup_failures) == ("succeeded", "REF-7", 0)
    (found,) = _records(effect, "reconciled")
    assert found.data["verdict"] == "found"


@KINDS
def test_a_lookup_that_keeps_failing_stops_for_a_person_once_its_budget_is_spent(kind):
    effect = _unknown(kind())
    effect.settle(LookupFailed("HTTP 503"))
    effect.settle(LookupFailed("HTTP 503"))
    run = _run(effect)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "2 lookups by key failed, the last with: HTTP 503" in run.status_message
    assert effect.row().status == "unknown"  # never relabelled failed


@KINDS
def test_a_person_settles_an_unknown_effect_with_evidence(kind):
    effect = _unknown(kind())
    effect.settle(Undetermined("the ledger is down"))
    run = _run(effect)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "reconciliation could not tell: the ledger is down" in run.status_message
    with pytest.raises(EvidenceRequired):
        effect.person_settles(Found("REF-9"), evidence="")
    assert effect.row().status == "unknown"
    effect.person_settles(Found("REF-9"), evidence="seen in the ledger UI")
    row = effect.row()
    assert (row.status, row.remote_ref) == ("succeeded", "REF-9")
    assert _run(effect).status == RunStatus.QUEUED
    (settled,) = [r for r in _records(effect, "reconciled") if r.actor_user_id is None
                  and r.reason == "checked"]
    assert settled.data["verdict"] == "found"
    assert settled.data["evidence"] == "seen in the ledger UI"
    # The reference the person gave is in their record, for steps and tool calls alike.
    assert settled.data["remote_ref"] == "REF-9"


@KINDS
def test_the_late_result_of_a_fenced_off_worker_is_evidence_and_changes_nothing(kind):
    effect = kind()
    effect.send()
    old = effect.lease
    assert transitions.expire_lease(effect.run.pk,
                                    now=timezone.now() + timedelta(seconds=3600))
    before = effect.row()
    effect.record(transitions.Outcome(True, value={"late": 1}, remote_ref="OLD-1"), lease=old)
    after = effect.row()
    assert (after.status, after.remote_ref, after.result) == \
        (before.status, before.remote_ref, before.result)
    assert _run(effect).status == RunStatus.QUEUED
    (late,) = _records(effect, "late_result")
    assert late.data["succeeded"] is True and late.data["remote_ref"] == "OLD-1"
    assert late.data["claim"] == old.token and late.data["current_claim"] == old.token + 1


@pytest.mark.parametrize("kind,workflow", [(StepEffect, "test-gated-step"),
                                           (CallEffect, "test-gated-call")],
                         ids=["step", "tool_call"])
def test_the_stop_verdict_holds_each_kind_before_its_first_attempt(kind, workflow):
    effect = kind(workflow) if kind is StepEffect else kind(workflow, tool="pay")
    if kind is StepEffect:
        effect.name = "pay"
    effect.send()
    run, row = _run(effect), effect.row()
    assert run.status == RunStatus.WAITING and run.next_wake_at is None
    assert (row.status, row.attempt) == ("waiting", 0)  # nothing was sent


# --- the wait for a person before an attempt, and their decision -------------------------

def _spy(monkeypatch, owner, name) -> list:
    """Wrap the machine's `owner.name`, calling through: returns the list of (kind of
    effect, what it returned) for each call."""
    real, seen = getattr(owner, name), []

    def spy(*args, **kwargs):
        effect = next(a for a in args if isinstance(a, effects.StepEffect | effects.CallEffect))
        returned = real(*args, **kwargs)
        seen.append(("step" if isinstance(effect, effects.StepEffect) else "tool_call",
                     returned))
        return returned

    monkeypatch.setattr(owner, name, spy)
    return seen


class GatedStep(StepEffect):
    """A step with the stop verdict: a high-impact payment nothing can look up by key."""

    kind, name = "step", "pay"
    asks, decided = "approval_requested", "approval_decided"
    # The request shows the attempt it allows, why a person decides, and what it will do.
    shows = {"attempt", "verdict", "why", "key", "will_do"}
    # Declined: the step fails for good and the run waits for a person.
    declined = ("failed", RunStatus.ATTENTION)

    def __init__(self):
        super().__init__("test-gated-step")

    def person_decides(self, *, approved, comment=""):
        transitions.decide_approval(self.run.pk, step_name="pay", approved=approved,
                                    actor=OPERATOR, comment=comment)


class GatedCall(CallEffect):
    """A tool call whose tool has the stop verdict (and asks for approval of every call)."""

    kind = "tool_call"
    asks, decided = "tool_call_approval_requested", "tool_call_approval_decided"
    # The request shows the arguments (as people may see them) and the hash it binds.
    shows = {"tool_call", "tool", "args_hash", "arguments"}
    # Declined: the call never runs, and the agent goes on (its model is told).
    declined = ("declined", RunStatus.QUEUED)

    def __init__(self):
        super().__init__("test-gated-call", tool="pay")

    def person_decides(self, *, approved, comment=""):
        transitions.decide_tool_call(self.run.pk, step_name="act", call_ref=self.call.ref,
                                     args_hash=self.call.args_hash, approved=approved,
                                     actor=OPERATOR, comment=comment)


GATED = pytest.mark.parametrize("kind", [GatedStep, GatedCall], ids=["step", "tool_call"])


def _waits_with_nothing_sent(effect, attempts_sent: int) -> None:
    run, row = _run(effect), effect.row()
    assert run.status == RunStatus.WAITING and run.next_wake_at is None
    assert (row.status, row.attempt) == ("waiting", attempts_sent)
    (wait,) = ApprovalWait.objects.filter(run=run)
    assert wait.step_name == effect.name
    assert wait.tool_call_id == (effect.call.pk if effect.kind == "tool_call" else None)


@GATED
def test_an_approval_allows_exactly_one_attempt_and_the_next_asks_again(kind, monkeypatch):
    waits = _spy(monkeypatch, effects, "held_for_approval")
    decisions = _spy(monkeypatch, effects, "decided_by_person")
    effect = kind()
    effect.send()
    _waits_with_nothing_sent(effect, attempts_sent=0)
    (asked,) = _records(effect, effect.asks)
    assert effect.shows <= set(asked.data)

    effect.person_decides(approved=True)
    assert _run(effect).status == RunStatus.QUEUED
    effect.send()
    assert (effect.row().status, effect.row().attempt) == ("running", 1)  # the approved one
    # It meets a transient error: the resend is another attempt, and asks again.
    effect.record(TRANSIENT)
    assert effect.row().status == "scheduled"
    effect.send()
    _waits_with_nothing_sent(effect, attempts_sent=1)
    assert len(_records(effect, effect.asks)) == 2

    # Both kinds wait in the one machine function: waited, let the approved attempt
    # through, waited again; and the decision is applied by the one function too.
    assert [waited for kind_seen, waited in waits if kind_seen == effect.kind] == \
        [True, False, True]
    assert decisions == [(effect.kind, None)]


@GATED
def test_a_declined_attempt_is_never_sent(kind, monkeypatch):
    decisions = _spy(monkeypatch, effects, "decided_by_person")
    effect = kind()
    effect.send()
    effect.person_decides(approved=False, comment="not this vendor")
    run, row = _run(effect), effect.row()
    assert (row.status, run.status) == effect.declined
    assert row.attempt == 0
    assert "operator" in row.error_message and "not this vendor" in row.error_message
    if run.status == RunStatus.ATTENTION:
        assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    (decided,) = _records(effect, effect.decided)
    assert decided.data["approved"] is False and decided.reason == "not this vendor"
    assert not ApprovalWait.objects.filter(run=run).exists()
    assert decisions == [(effect.kind, None)]


# --- the failure of an undo ---------------------------------------------------------------

def _agent_run_with_a_note_written():
    """A test-agent run in attention whose one tool call wrote a note (its tool declares an
    undo)."""
    run = place(new_run("test-agent"), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                step_statuses={"assist": "failed"})
    step = Step.objects.get(run=run, name="assist")
    key = tool_call_key(run.workflow_name, run.business_key, "assist", 1, 1, 0, "write-note")
    return run, ToolCall.objects.create(
        step=step, turn=1, index=0, call_id="c1", tool="write-note", kind="write",
        arguments={"text": "hi"}, args_hash=args_hash({"text": "hi"}),
        status=ToolCallStatus.SUCCEEDED, idempotency_key=key,
        compensation_key=tool_compensation_key(key), attempt=1, remote_ref="NOTE-1",
        started_at=timezone.now(), updated_at=timezone.now())


def test_a_failed_undo_leaves_either_kind_standing_through_one_rule(monkeypatch):
    failed_undos = _spy(monkeypatch, effect_rows.EffectRow, "undo_failed")
    refused = transitions.Outcome(False, error=Classified(ErrorClass.PERMANENT, "HTTP 409"))

    # A step's undo, in the compensation its workflow's policy started: the run stops.
    effect = StepEffect("test-effect-saga-step")
    effect.send()
    effect.record(PERMANENT)
    lease = effect.lease
    assert lease.compensating and lease.work.name == "reserve"
    transitions.record_outcome(lease, lease.work, refused)
    reserve = Step.objects.get(run=effect.run, name="reserve")
    assert (reserve.status, reserve.error_class, reserve.error_message) == \
        ("compensation_failed", ErrorClass.PERMANENT, "HTTP 409")
    run = _run(effect)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.COMPENSATION_FAILED)
    (record,) = _records(effect, "compensation_failed")
    assert record.data["error"] == "HTTP 409" and record.data["key"] == reserve.compensation_key

    # A person's undo of one tool call: the call stands, the run stays where it was.
    run, call = _agent_run_with_a_note_written()
    transitions.begin_tool_call_undo(run.pk, step_name="assist", call_ref=call.ref,
                                     actor=OPERATOR, reason="note withdrawn")
    transitions.record_tool_call_undo(run.pk, call_id=call.pk, attempt=1, actor=OPERATOR,
                                      error="HTTP 409", error_class=ErrorClass.PERMANENT)
    call.refresh_from_db()
    assert (call.status, call.error_class, call.error_message) == \
        ("compensation_failed", ErrorClass.PERMANENT, "HTTP 409")
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    (record,) = AuditRecord.objects.filter(run=run, action="compensation_failed")
    assert record.before == {"call_status": "compensating"}
    assert record.after == {"call_status": "compensation_failed"}
    # Like the record of a successful undo, it carries the undo's intent.
    assert record.data["error"] == "HTTP 409" and record.data["operator"] is True
    assert (record.data["key"], record.data["attempt"]) == (call.compensation_key, 1)

    assert failed_undos == [("step", None), ("tool_call", None)]


# The rules of the machine, by name: a function of the step or tool-call modules whose name
# says it does one of these is a copy of it.
RULE = re.compile(r"succe|fail|resend|retry|settle|look|late|stop|release|halt|unknown")
# The transitions themselves: each locks the run and hands the effect to the machine (an
# outcome and a lookup's verdict, of either kind, through one try each, which a clash tries
# again).
TRANSITIONS = {"settle_unknown", "settle_unknown_once", "settle_tool_call",
               "settle_tool_call_once", "_record_success_in_one_statement"}


def test_steps_and_tool_calls_keep_no_rule_of_their_own():
    for module in (lease_cycle, unknown_outcome, agent_calls, agent_compensation,
                   compensation):
        own = {name for name, fn in inspect.getmembers(module, inspect.isfunction)
               if fn.__module__ == module.__name__}
        copies = {name for name in own if RULE.search(name)} - TRANSITIONS
        assert not copies, f"{module.__name__} has rules of its own: {sorted(copies)}"
    # The transitions of both kinds hand the effect to the same functions.
    for transition, rules in [
            (lease_cycle.record_outcome_once,
             {"succeed", "fail", "late_result", "undo_outcome"}),
            (agent_calls.record_tool_outcome_once, {"succeed", "fail", "late_result"}),
            (unknown_outcome.settle_unknown_once, {"settle"}),
            (agent_calls.settle_tool_call_once, {"settle"}),
            (lease_cycle.advance, {"held_for_approval"}),
            (agent_calls.begin_tool_call_once, {"held_for_approval"}),
            (approval_waits.decide_approval, {"decided_by_person"}),
            (agent_operator.decide_tool_call, {"decided_by_person"}),
            (effects.undo_outcome, {"undo_failed"}),
            (agent_operator.record_tool_call_undo, {"undo_failed"})]:
        assert rules <= set(transition.__code__.co_names), transition.__name__
    assert lease_cycle.effects is effects and agent_calls.effects is effects


def _names(code) -> set[str]:
    """The names `code` uses, with those of the functions (lambdas) written inside it."""
    inner = (const for const in code.co_consts if inspect.iscode(const))
    return set(code.co_names).union(*map(_names, inner))


# What the lease holder hands the machine when an effect has ended: its outcome, a lookup's
# verdict on it, its undo's outcome.
OUTCOMES = {"succeed", "fail", "settle", "late_result", "undo_outcome", "undone"}
# The lease holder's modules: a step's, and an agent step's turns, tool calls and undos.
LEASE_HOLDERS = (lease_cycle, unknown_outcome, agent_turns, agent_calls, agent_compensation)


def _own(module) -> dict:
    return {name: fn for name, fn in inspect.getmembers(module, inspect.isfunction)
            if fn.__module__ == module.__name__}


def _written_again(module) -> set[str]:
    """The functions of `module` that run as a try of clashes.written_again_on_clash (called
    in the function handed to it), or as a part of such a try."""
    own = _own(module)
    tries = {name for fn in own.values() if "written_again_on_clash" in fn.__code__.co_names
             for inner in fn.__code__.co_consts if inspect.iscode(inner)
             for name in _names(inner) if name in own}
    # What a try calls of its own module is a part of it (the one-statement success).
    parts = {name for t in tries for name in _names(own[t].__code__) if name in own}
    return tries | parts


def test_every_outcome_the_lease_holder_writes_is_written_again_on_a_clash():
    # Of either kind of effect: a transition that writes an outcome in one try is called
    # through clashes.written_again_on_clash (or is a part of such a try), so a tool call's
    # outcome is not dropped where a step's is written again.
    for module in (lease_cycle, unknown_outcome, agent_calls, agent_compensation):
        writes = {name for name, fn in _own(module).items()
                  if OUTCOMES & set(fn.__code__.co_names)}
        assert writes, module.__name__
        assert writes <= _written_again(module), \
            f"{module.__name__}: not written again on a clash: " \
            f"{sorted(writes - _written_again(module))}"


def test_every_checkpoint_the_lease_holder_writes_is_written_again_on_a_clash():
    # Not only outcomes: an effect's intent (a tool call's, an undo's), a model's turn (a
    # paid call: dropped, the model was asked again after the take-back), calls taken back,
    # a stop for a person. Every transition of the lease holder's modules (each opens the
    # run under the lease: lease_cycle.holding) is one try of written_again_on_clash, so a
    # new one that is not fails here.
    for module in LEASE_HOLDERS:
        writes = {name for name, fn in _own(module).items()
                  if "holding" in fn.__code__.co_names
                  or {"begun", "undo_begun"} & set(fn.__code__.co_names)}
        assert writes, module.__name__
        assert writes <= _written_again(module), \
            f"{module.__name__}: not written again on a clash: " \
            f"{sorted(writes - _written_again(module))}"
    assert {"record_agent_turn_once", "begin_tool_call_once",
            "begin_tool_compensation_once"} <= set().union(
                *map(_written_again, LEASE_HOLDERS))
