"""The drill kit: crash drills against any registered workflow, before it goes to production.

Each drill starts a run of the workflow with its example input, breaks it at a step boundary
the way production would (a worker process killed with SIGKILL, the same event delivered
many times at once, a late permanent failure), lets the runtime recover it exactly as the
sweeper and a worker would, and compares what happened with what must happen:

1. crash before the first external request: the action is performed once;
2. crash after the call, before its outcome is stored: reconciled or resent with the same
   key, still one effect (fails, naming the fix, for a step nothing can settle);
5. restart after a model decision was stored (the worker killed at the next step that calls
   something, or at an agent's first turn): the stored decision is reused;
2a, 5a. (for an agent step) crash after a tool call committed at its receiver: reconciled
   by the call's key, one effect; crash after a model turn was stored: the turn is reused,
   each tool call sent once;
7a. (for an agent whose tool waits for a person, given the workflow's approval_example) an
   approval of arguments other than those waiting is refused and sends nothing; the
   approval of what waits runs the call once;
7b. (for an approval step with a rule, approve_if, which may let the example through) a
   run of the workflow's approval_example, which the rule asks a person about: approved
   through its request, it goes on; without one, the row says that path was not exercised;
8. the same start event delivered 20 times at once: one run, each step called once;
6. (where steps declare compensation) a late step fails: compensations run newest first.

Runs are ordinary runs with business keys starting "drill:", flagged Run.drill: the
console leaves them out of its lists and attention count unless asked, approval requests
for them notify nobody, and `manage.py remove_drill_runs` archives and removes them. What
they wait for is carried through by "drill" (drill_waits), before a crash point as after it:
an event is delivered with the default its wait declares (as its timeout would), a timer
woken, and what waits for a person (approval steps, attempts of a step with the stop verdict,
tool calls) approved (an approval step whose approve_if needs no person for the input is
approved by that rule, as in production: nothing to carry through); an event whose wait
declares no default is not made up, and the drills whose crash point lies behind it are "not
exercised". With the approvals app installed, through
its approval requests: it registers its approver here (register_approver, in its
AppConfig.ready; runs cannot import it), which opens each request and decides it as the drill
user, so the drill exercises the path a person's approval takes. Without one, the fallback
approves straight through the transitions (decide_tool_call, decide_approval) as the actor
"drill", and the drill table says so.

A drill that applies but whose crash point no worker reaches for a reason that is no failure
of recovery (drill 5 where only waits follow the decision; a crash point behind an event
the drill does not make up) is "not exercised", saying why:
neither passed nor failed.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor

from .. import store
from ..agents.agent_loop import AFTER_TURN
from ..definitions import definition
from ..execution import executor
from ..machine import crashpoints, transitions
from ..machine.errors import TransitionNotAllowed
from ..machine.transitions.agent_calls import args_hash
from ..models import AgentTurn, AttentionReason, Run, RunStatus, Step, StepStatus, ToolCall
from .actions import ACTIONS, ActionInput
from .drill_approvals import TITLE, person_path_verdict, ruled_steps, without_example
from .drill_batches import drill_key, new_batch, started_in
from .drill_evidence import call_sends, calls_sent, found_by_key, intent_keys
from .drill_results import (
    DrillResult,
    failed,
    not_exercised,
    restart_after_turn_verdict,
    run_guarded,
    short_of,
    went_through,
)
from .drill_waits import carried_through, event_not_made_up, waits_for_approval

# What approves a drill run's waits (approvals.drill.approve_for_drill, registered by the
# approvals app): approve(run) -> whether a decision was recorded. None: the fallback.
_approver: Callable[[Run], bool] | None = None



def is_drill_run(run: Run) -> bool:
    """Whether `run` was started by a drill (the drill approver acts on nothing else): its
    flag, which only the drill kit sets (start_run's `drill`), never a key a client may choose."""
    return run.drill


def register_approver(approve: Callable[[Run], bool]) -> None:
    global _approver
    _approver = approve


def approval_path() -> str:
    """How the drills approve what their runs wait for, for the drill table."""
    if _approver is not None:
        return "through approval requests (the approvals app)"
    return "straight through the transitions (fallback: no approvals app)"

DRILL = Actor.system("drill")
# A compensation a person starts after a high-impact effect needs a second person.
DRILL_SECOND = Actor.system("drill-second-person")
# The steps that call nothing: a worker reaches no crash point at them.
WAITS = (definition.APPROVAL, definition.SLEEP, definition.EVENT)
SETTLED = {RunStatus.COMPLETED, RunStatus.COMPENSATED, RunStatus.TERMINATED,
           RunStatus.ATTENTION, RunStatus.COMPENSATION_FAILED}


def run_drills(workflow: definition.Workflow, *, batch: str = "") -> list[DrillResult]:
    """Run every drill that applies to `workflow` and report each; the runs started carry
    `batch` (a new token without it) in their keys (drill_batches)."""
    with started_in(batch or new_batch()):
        return _drills(workflow)


def _drills(workflow: definition.Workflow) -> list[DrillResult]:
    if workflow.example is None:
        raise ValueError(f"{workflow.name} declares no example input: pass example={{...}} to "
                         "its Workflow so the drills can start runs")
    effects = [s for s in workflow.steps if s.has_side_effect]
    results = []
    if effects:
        results.append(run_guarded("1 crash before the request", _drill_crash, workflow,
                                effects[0], crashpoints.BEFORE_CALL, "1"))
        results.append(run_guarded("2 crash after the call", _drill_crash, workflow, effects[0],
                                crashpoints.AFTER_CALL, "2"))
    else:
        results += [DrillResult("1 crash before the request", "-", "no side-effecting step", None),
                    DrillResult("2 crash after the call", "-", "no side-effecting step", None)]
    results.append(run_guarded("5 restart after the decision was stored", _drill_decision,
                            workflow))
    for agent in (s for s in workflow.steps if s.kind == definition.AGENT):
        try:
            results += _agent_drills(workflow, agent)
        except Exception as exc:  # reported as the drill's failure, never a traceback
            results.append(failed(f"agent drills ({agent.name})", exc))
    for step in ruled_steps(workflow):
        results.append(run_guarded(TITLE.format(step.name), _drill_person_path, workflow,
                                   step))
    results.append(run_guarded("8 same start event delivered at once",
                            _drill_concurrent_delivery, workflow))
    results.append(run_guarded("6 late failure after earlier effects", _drill_compensation,
                            workflow))
    return results


# --- the drills ----------------------------------------------------------------------------

def _drill_crash(workflow, step: definition.StepDef, where: str, number: str) -> DrillResult:
    title = (f"{number} crash before the request ({step.name})" if where == crashpoints.BEFORE_CALL
             else f"{number} crash after the call, before the outcome ({step.name})")
    expected = "performed once, same key" if where == crashpoints.BEFORE_CALL \
        else "one effect: reconciled or resent with the same key"
    run = _start(workflow, f"crash-{where}")
    if not _kill_at(run, f"{where}:{step.name}"):
        return short_of(title, expected, run)
    run = recover(run)
    row = Step.objects.get(run=run, name=step.name)
    intents = intent_keys(run, step.name)
    if row.status != StepStatus.SUCCEEDED:
        if row.status == StepStatus.UNKNOWN and step.reconcile_fn is None \
                and not step.honours_key:
            return DrillResult(title, expected,
                               f"stuck unknown: {step.name} has neither a key-honouring receiver "
                               "nor a reconcile function; add a reconcile function that looks "
                               "the effect up by ctx.key, or send ctx.key to a receiver that "
                               "deduplicates on it", False)
        return DrillResult(title, expected, f"step {row.status}, run {run.status}: "
                                            f"{run.status_message}", False)
    problems = []
    if len(set(intents)) != 1:
        problems.append(f"{len(set(intents))} different keys sent")
    sends = len(intents)
    if sends > 1 and not step.honours_key and where == crashpoints.AFTER_CALL:
        problems.append(f"sent {sends} times to a receiver that ignores keys")
    found, lookup = found_by_key(workflow, run, step)
    if lookup and found != row.remote_ref:
        problems.append(f"lookup by key {lookup}, step recorded {row.remote_ref}")
    if where == crashpoints.BEFORE_CALL:
        how = f"{sends} intents (the first never called)"
    else:
        how = "found by key, not resent" if sends == 1 else f"resent ({sends} intents)"
    observed = (f"{how}, one key, ref {row.remote_ref or '-'}; run {run.status}"
                + (f"; {'; '.join(problems)}" if problems else ""))
    return DrillResult(title, expected, observed, not problems and run.status != "attention")


def _drill_decision(workflow) -> DrillResult:
    title = "5 restart after the decision was stored"
    expected = "stored decision reused, model not asked again"
    steps = workflow.steps
    index = next((i for i, s in enumerate(steps) if s.kind == definition.DECISION), None)
    if index is None or index + 1 >= len(steps):
        return DrillResult(title, expected, "no decision step followed by another step", None)
    decision = steps[index]
    # Where a worker is at work once the decision is stored: the next step that calls
    # something (a wait before it is carried through by the drill), or an agent's first turn.
    after = next((s for s in steps[index + 1:] if s.kind not in WAITS), None)
    if after is None:
        return not_exercised(title, expected, (
            f"only waits follow {decision.name} ({', '.join(s.name for s in steps[index + 1:])})"
            ", so no worker is at work to crash once the decision is stored"))
    point = (f"{AFTER_TURN}:{after.name}" if after.kind == definition.AGENT
             else f"{crashpoints.BEFORE_CALL}:{after.name}")
    run = _start(workflow, "decision")
    if not _kill_at(run, point):
        return short_of(title, expected, run)
    stored = Step.objects.get(run=run, name=decision.name).result
    run = recover(run)
    row = Step.objects.get(run=run, name=decision.name)
    asked = len(intent_keys(run, decision.name))
    passed = asked == 1 and row.result == stored
    return DrillResult(title, expected, f"asked {asked}x, decision "
                                        f"{'unchanged' if row.result == stored else 'changed'}; "
                                        f"run {run.status}", passed)


def _drill_person_path(workflow, step: definition.StepDef) -> DrillResult:
    """7b: a run of the approval_example input, carried through as any drill run: `step`'s
    rule asks a person, whom the drill stands in for (drill_approvals judges the run)."""
    if workflow.approval_example is None:
        return without_example(step)
    run = _start(workflow, "rule-asks-a-person", input=workflow.approval_example)
    return person_path_verdict(recover(run, fresh=True), step)


def _drill_concurrent_delivery(workflow, deliveries: int = 20) -> DrillResult:
    title = f"8 same start event delivered {deliveries}x at once"
    expected = "one run, each step called once"
    key = drill_key("concurrent")
    barrier = threading.Barrier(deliveries)
    created, errors = [], []

    def deliver():
        try:
            barrier.wait(timeout=30)
            created.append(transitions.start_run(workflow=workflow.name, business_key=key,
                                                 input=workflow.example, actor=DRILL,
                                                 wake=False, drill=True)[1])
        except Exception as exc:  # reported below, never swallowed
            errors.append(repr(exc))
        finally:
            connections.close_all()

    _in_threads(deliver, deliveries)
    runs = list(Run.objects.filter(workflow_name=workflow.name, business_key=key))
    if errors or len(runs) != 1:
        return DrillResult(title, expected, f"{len(runs)} runs; errors: {errors[:2]}", False)
    run = runs[0]

    def wake():
        try:
            executor.advance_run(run.pk, worker=f"drill-{threading.get_ident()}", drill=True)
        finally:
            connections.close_all()

    _in_threads(wake, 4)  # duplicate wake-ups racing for the same run
    run = recover(run)
    if (why := event_not_made_up(run)) is not None:
        return not_exercised(title, expected, why)  # the steps behind the wait are not called
    calls = {s.name: len(intent_keys(run, s.name)) for s in workflow.steps
             if s.kind not in (*WAITS, definition.AGENT)}  # waits call nothing
    # An agent step is claimed again after each wait: each of its tool calls counts.
    calls.update(calls_sent(run))
    repeated = {name: n for name, n in calls.items() if n != 1}
    observed = (f"{len(runs)} run ({sum(created)} created), "
                f"{'each step called once' if not repeated else f'repeated: {repeated}'}; "
                f"run {run.status}")
    return DrillResult(title, expected, observed,
                       not repeated and sum(created) == 1 and run.status == RunStatus.COMPLETED)


def _drill_compensation(workflow) -> DrillResult:
    title = "6 late failure after earlier effects"
    effects = [s for s in workflow.steps if s.has_side_effect]
    late = effects[-1] if effects else None
    undo = [s for s in workflow.steps[: workflow.steps.index(late)]
            if s.compensate_fn is not None][::-1] if late else []
    if not undo:
        return DrillResult(title, "-", "no compensation declared before the last effect", None)
    high = [s.name for s in undo if s.impact == definition.HIGH]
    expected = (f"compensated newest first: {', '.join(s.name for s in undo)}"
                + (f"; paused before undoing {', '.join(high)} until a person confirms, "
                   "nothing sent or undone before that" if high else ""))
    run = _start(workflow, "compensation")
    pauses, early = [], []
    with crashpoints.failing(late.name):
        run = recover(run, fresh=True)
        if (why := event_not_made_up(run)) is not None:
            return not_exercised(title, expected, why)
        if run.status == RunStatus.ATTENTION and \
                run.attention_reason != AttentionReason.COMPENSATION_PAUSED:
            # No automatic policy: a person compensates (a second person approving it).
            transitions.compensate(run.pk, actor=DRILL, reason="drill: undo after late failure",
                                   approved_by=DRILL_SECOND)
            run = recover(run, fresh=True)
        while (run.status == RunStatus.ATTENTION
               and run.attention_reason == AttentionReason.COMPENSATION_PAUSED):
            pauses.append(run.current_step)
            # What must hold at the pause: this undo not sent, no older one started.
            older = [s.name for s in undo[undo.index(workflow.step(run.current_step)) + 1:]]
            paused = transitions.paused_undo(run, list(run.steps.all()), workflow)
            # An undo's intent is its row (an attempt counted): the paused step's or tool call's.
            early += [s.name for s in Step.objects.filter(
                run=run, name__in=older, compensation_attempt__gt=0)]
            early += [str(paused)] if (paused.call or paused.step).compensation_attempt else []
            ACTIONS["confirm_compensation"].perform(
                run.pk, actor=DRILL, given=ActionInput(reason="drill: correction checked",
                                                       step=run.current_step))
            run = recover(run, fresh=True)
    order = list(run.audit_records.filter(action=AuditAction.COMPENSATION_SUCCEEDED).order_by("seq")
                 .values_list("step_name", flat=True))
    passed = (run.status == RunStatus.COMPENSATED and order == [s.name for s in undo]
              and pauses == high and not early)
    observed = (f"run {run.status}; undone: {', '.join(order) or '-'}"
                + (f"; paused at {', '.join(pauses)}" if pauses else "")
                + (f"; sent before confirmation: {', '.join(early)}" if early else ""))
    return DrillResult(title, expected, observed, passed)


def _agent_drills(workflow, agent: definition.AgentSpec) -> list[DrillResult]:
    """An agent step's drills: a crash after a tool call committed at its receiver, and a
    crash after a model turn was stored."""
    results = []
    writes = [t for t in agent.tools.values() if t.has_side_effect]
    title = f"2a crash after a tool call committed ({agent.name}/" \
            f"{writes[0].name if writes else '-'})"
    expected = "one effect: the call reconciled by its key, not resent"
    if not writes:
        results.append(DrillResult(title, "-", "the agent has no write or notify tool", None))
    else:
        tool = writes[0]
        run = _start(workflow, "agent-crash-after-call")
        if not _kill_at(run, f"{crashpoints.AFTER_CALL}:{agent.name}/{tool.name}"):
            results.append(short_of(title, expected, run))
        else:
            run = recover(run)
            call = ToolCall.objects.filter(step__run=run, tool=tool.name).first()
            sends = call_sends(call) if call else 0
            passed = (call is not None and call.status == "succeeded" and sends == 1
                      and went_through(run))
            results.append(DrillResult(title, expected, (
                f"call {call.status if call else 'missing'}, sent {sends}x, ref "
                f"{(call.remote_ref if call else '') or '-'}; run {run.status}"), passed))
    results.append(_drill_approval_binding(workflow, agent))
    return results + [drill_restart_after_turn(workflow, agent)]


def drill_restart_after_turn(workflow, agent: definition.AgentSpec) -> DrillResult:
    """5a: the worker killed once the agent's first model turn is stored; recovered, the
    stored turn is reused, never asked for again, and no tool call is sent twice."""
    title = f"5a restart after a model turn was stored ({agent.name})"
    expected = "the stored turn reused: model requests = stored turns; each tool call sent once"
    run = _start(workflow, "agent-crash-after-turn")
    if not _kill_at(run, f"{AFTER_TURN}:{agent.name}"):
        return short_of(title, expected, run)
    stored = list(AgentTurn.objects.filter(step__run=run).values_list("index", "tool_calls"))
    observed, passed = restart_after_turn_verdict(recover(run), stored)
    return DrillResult(title, expected, observed, passed)


def _drill_approval_binding(workflow, agent: definition.AgentSpec) -> DrillResult:
    """A person's approval authorises the arguments they saw and no others: an approval
    carrying another hash (the arguments changed after the person looked) is refused and
    sends nothing; the approval of what waits runs the call once."""
    title = f"7a an approval bound to the call's arguments ({agent.name})"
    expected = ("an approval of other arguments refused, nothing sent; the approved call "
                "runs once")
    gated = [t for t in agent.tools.values() if t.has_side_effect
             and (t.approve_if is not None or t.impact == definition.HIGH)]
    if not gated:
        return DrillResult(title, "-", "no tool waits for a person's approval", None)
    if workflow.approval_example is None:
        return DrillResult(title, expected, "the workflow declares no approval_example input",
                           False)
    run = _start(workflow, "agent-approval", input=workflow.approval_example)
    deadline = time.monotonic() + 120
    calls = []
    while not calls and time.monotonic() < deadline:
        executor.advance_run(run.pk, worker="drill", drill=True)
        run.refresh_from_db()
        calls = transitions.waiting_tool_calls(run)
        if not calls and run.status in SETTLED:
            break
        if not calls and not _carried_through(run) \
                and (why := event_not_made_up(run)) is not None:
            return not_exercised(title, expected, why)  # what waits before the agent
    if not calls:
        return DrillResult(title, expected, f"no tool call waited for approval; run "
                                            f"{run.status}", False)
    call = calls[0]
    changed = {**(call.arguments or {}), "changed-after-review": True}
    try:
        transitions.decide_tool_call(run.pk, step_name=call.step.name, call_ref=call.ref,
                                     args_hash=args_hash(changed), approved=True, actor=DRILL,
                                     comment="an approval of other arguments")
        refused = False
    except TransitionNotAllowed:
        refused = True
    call.refresh_from_db()
    sent_before = call_sends(call)
    run = recover(run, fresh=True)
    call.refresh_from_db()
    sends = call_sends(call)
    passed = (refused and sent_before == 0 and sends == 1 and call.status == "succeeded"
              and went_through(run))
    return DrillResult(title, expected, (
        f"other arguments {'refused' if refused else 'ACCEPTED'}, {sent_before} sent; "
        f"{call.tool} {call.status}, sent {sends}x after its approval; run {run.status}"),
        passed)


# --- how the drills break and recover runs -------------------------------------------------

def _start(workflow, tag: str, input: dict | None = None) -> Run:
    key = drill_key(tag)
    # No wake-up hint: the drill, not a running worker, must be the one to advance it.
    return transitions.start_run(
        workflow=workflow.name, business_key=key, input=input or workflow.example,
        actor=DRILL, wake=False, drill=True)[0]


def _kill_at(run: Run, point: str) -> bool:
    """Advance the run in a worker process that SIGKILLs itself at `point`, carrying the run
    through each wait before it (a wait ends a worker's advance): True once the worker died
    there; False if the run stopped short of it waiting for nothing the drill can end."""
    manage = Path(settings.BASE_DIR) / "manage.py"
    while True:
        result = subprocess.run(
            [sys.executable, str(manage), "advance_run", str(run.pk), "--drill"],
            env=_child_env(point),
            cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=300,
        )
        if result.returncode == -signal.SIGKILL:
            return True
        if not _carried_through(run, patience=5):
            return False


def _carried_through(run: Run, *, patience: float = 0) -> bool:
    """carried_through as the drill; a person's wait whose approval request recorded no
    decision yet (another process was opening it) is asked again for `patience` seconds."""
    deadline = time.monotonic() + patience
    while not carried_through(run, actor=DRILL, approver=_approver):
        if time.monotonic() >= deadline or not waits_for_approval(run):
            return False
        time.sleep(0.05)
    return True


def _child_env(point: str) -> dict:
    return {**os.environ, "DATABASE_URL": store.current().url(), "RUNS_CRASH_AT": point,
            "RUNS_CRASH_MODE": "self", "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "RUNS_EXTRA_WORKFLOW_MODULES": ",".join(settings.RUNS_WORKFLOW_MODULES),
            "SANDBOX_BASE_URL": getattr(settings, "SANDBOX_BASE_URL", ""),
            "MODEL_BASE_URL": getattr(settings, "MODEL_BASE_URL", "")}


def recover(run: Run, *, fresh: bool = False, timeout: float = 120) -> Run:
    """Do what the sweeper and a worker would: take the run back from the dead worker, then
    advance it until it settles, carrying it through what it waits for as the drill
    (drill_waits.carried_through)."""
    if not fresh:
        # The killed worker's lease would run out; the drill does not wait for it.
        transitions.expire_lease(run.pk, now=timezone.now() + timedelta(days=1), actor=DRILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.advance_run(run.pk, worker="drill", drill=True)
        run.refresh_from_db()
        if run.status in SETTLED:
            return run
        if _carried_through(run):
            continue
        if event_not_made_up(run) is not None:
            return run  # as far as a drill carries it
        if run.next_wake_at is not None:  # a retry's backoff
            time.sleep(max(0.0, min((run.next_wake_at - timezone.now()).total_seconds(), 5)))
        else:
            time.sleep(0.05)
    return run


def _in_threads(target, count: int) -> None:
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
