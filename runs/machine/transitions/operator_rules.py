"""When each operator action can succeed, and who must agree: one answer to "can this action
succeed on this run (and step)?". The operator transitions refuse with it, and every caller
(console, bulk actions, API, CLI, through runs.operator.actions) offers an action only where it
returns None, so a rule written here cannot drift from the rule a caller shows."""

from dataclasses import dataclass

from django.db.models import Exists, F, OuterRef, Q

from audit.quoting import quoted

from ...definitions import definition
from ...models import (
    AttentionReason,
    ErrorClass,
    Run,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from ..errors import NoSuchStep, TransitionNotAllowed
from .compensation import compensation_plan
from .in_flight import compensation_order, undo_unanswered
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    Effect,
    allowed,
    require_reason,
    steps_of,
    unsettled_effects,
)
from .operator_words import LABELS, STATE_WORDS
from .rerun_rules import rerun_range, rerun_step_refusal, rerun_steps
from .tool_call_rules import (
    CALL_OPTIONAL_ACTIONS,
    TOOL_CALL_ACTIONS,
    call_named,
    call_state_refusal,
    calls_allowed,
    calls_of,
    calls_open_said,
)
from .tool_call_rules import step_refusal as tool_call_step_refusal

STEP_ACTIONS = frozenset({"reconcile", "retry_step", "ask_again", "confirm_compensation",
                          "reconcile_tool_call", "retry_tool_call", "compensate_tool_call",
                          "cancel_tool_call", "rerun_from_step"})
# Actions that end a run, or undo or abandon its effects.

SECOND_PERSON_ACTIONS = frozenset({"cancel", "terminate", "compensate", "rerun_from_step"})
# What a run ended with an effect unsettled still allows: settling it.
SETTLE_ACTIONS = frozenset({"reconcile", "reconcile_tool_call"})
# Actions that move a run forward again, which a compensation under way rules out.

FORWARD_ACTIONS = frozenset({"resume", "reconcile", "retry_step", "ask_again",
                             "reconcile_tool_call", "retry_tool_call"})

EFFECT_KINDS = (definition.WRITE, definition.NOTIFY)

_UNDO_STARTED = frozenset({StepStatus.COMPENSATING, StepStatus.COMPENSATED,
                           StepStatus.COMPENSATION_FAILED})

# The states in which an effect stands or may stand: the second person is asked about each.
# One in flight may stand too: a run ended under it leaves it unknown, and it may land.
_MAY_STAND = {
    StepStatus.SUCCEEDED: "succeeded",
    StepStatus.RUNNING: "in flight: may be happening now",
    StepStatus.UNKNOWN: "outcome unknown: may have happened",
    StepStatus.COMPENSATING: "being undone",
    StepStatus.COMPENSATION_FAILED: "undo failed: still stands",
}
_CALL_MAY_STAND = {
    ToolCallStatus.SUCCEEDED: "succeeded",
    ToolCallStatus.RUNNING: "in flight: may be happening now",
    ToolCallStatus.UNKNOWN: "outcome unknown: may have happened",
    ToolCallStatus.COMPENSATING: "being undone",
    ToolCallStatus.COMPENSATION_FAILED: "undo failed: still stands",
}

# An undo whose outcome is unknown (in flight when its run was ended) is not a failed one:
# unknown is never relabelled failed.
_UNDO_IN_DOUBT = "undo outcome unknown: may have been undone"


def undo_outcome_unknown(row) -> bool:
    """Whether `row` (a step or a tool call) stands as a failed undo whose last try's outcome
    is unknown (it timed out after sending, or was in flight when its run was ended): it
    may have been undone."""
    return row.status == StepStatus.COMPENSATION_FAILED and row.error_class in (
        ErrorClass.UNKNOWN, ErrorClass.ENDED_IN_DOUBT)


def _standing(row, texts: dict) -> str:
    if undo_outcome_unknown(row):
        return _UNDO_IN_DOUBT
    return texts[row.status]


def high_impact_effects(steps: list[Step]) -> list[Effect]:
    """The high-impact effects that stand or may stand in another system (succeeded, in
    flight or unknown, not yet undone): those of the run's write and notify steps, and each
    tool call of its agent steps, whatever state the agent step itself is in."""
    effects = [Effect(s.name, s.status, _standing(s, _MAY_STAND), s.name) for s in steps
               if s.kind in EFFECT_KINDS and s.impact == definition.HIGH and s.status in _MAY_STAND]
    agents = {s.pk: s.name for s in steps if s.kind == definition.AGENT}
    if agents:
        # The current generation's: a re-run's earlier ones are weighed when it is asked for
        # (rerun_rules.standing_effects), as the earlier generations of a step are.
        calls = ToolCall.objects.filter(step_id__in=list(agents), impact=definition.HIGH,
                                        generation=F("step__generation"),
                                        status__in=list(_CALL_MAY_STAND)).order_by(
            "step_id", "turn", "index").only("step_id", "turn", "index", "tool", "status",
                                             "error_class")
        effects += [Effect(f"{agents[c.step_id]}: tool call {c.ref} {c.tool}",
                                   c.status, _standing(c, _CALL_MAY_STAND), agents[c.step_id])
                    for c in calls]
    return effects

def needs_second_person(action: str, steps: list[Step], step: Step | None = None) -> bool:
    """Whether `action` needs a second person's approval: it ends the run, or undoes or
    abandons its effects, or sends them again (a re-run), while a high-impact effect stands
    or may stand. The one rule, for every caller and for single and bulk actions alike. A
    re-run from `step` counts the effects from that step on (without `step`: all of them)."""
    if action not in SECOND_PERSON_ACTIONS:
        return False
    if action == "rerun_from_step" and step is not None:
        steps = rerun_range(steps, step)
    return bool(high_impact_effects(steps))

@dataclass(frozen=True)
class PausedUndo:
    """The high-impact undo a paused compensation waits to have confirmed: a step's, or (for
    an agent step) one of its tool calls'."""

    step: Step
    call: ToolCall | None = None

    def __str__(self) -> str:
        if self.call is None:
            return self.step.name
        # As the pause's message names it (effect_rows.CallEffect.name).
        return f"{self.step.name}: tool {self.call.tool} (call {self.call.ref})"


def paused_undo(run: Run, steps: list[Step],
                workflow_def: definition.Workflow | None) -> PausedUndo | None:
    """The undo a paused compensation waits to have confirmed (reads the agent step's calls
    only for a run paused there)."""
    if run.status != ATTENTION or run.attention_reason != AttentionReason.COMPENSATION_PAUSED:
        return None
    plan = compensation_plan(steps, workflow_def)
    if not plan:
        return None
    step = plan[0]
    if step.kind != definition.AGENT:
        return PausedUndo(step) if step.status == StepStatus.SUCCEEDED else None
    # The calls newer than the paused one are undone already: it is the first still standing.
    order = compensation_order(calls_of(step))
    call = order[0] if order else None
    if call is None or call.impact != definition.HIGH or call.status != ToolCallStatus.SUCCEEDED:
        return None
    return PausedUndo(step, call)

def step_refusal(action: str, run: Run, step: Step, steps: list[Step],
                 workflow_def: definition.Workflow | None) -> str | None:
    """Why `action` cannot be aimed at `step`, or None if it can."""
    where = f"step {step.name} of run {run.pk}"
    if action == "reconcile":
        if step.status not in (StepStatus.UNKNOWN, StepStatus.FAILED):
            return f"{where} is {step.status}; only an unknown or failed step can be reconciled"
        if step.kind not in EFFECT_KINDS:
            return f"{where} changes nothing in another system: there is nothing to reconcile"
    elif action == "retry_step":
        if step.status == StepStatus.UNKNOWN:
            return (f"the outcome of {step.name} is unknown: reconcile it first (look it up "
                    "by key, or record what you found); sending it again blindly could do it "
                    "twice")
        if step.status not in (StepStatus.FAILED, StepStatus.SCHEDULED):
            return f"{where} is {step.status}; only a failed or scheduled step can be retried"
    elif action == "ask_again":
        if step.kind != definition.DECISION or step.status != StepStatus.SUCCEEDED:
            return f"{where} is not a stored decision"
        # An agent acted once it started: its tool calls' effects stand whatever its own
        # end (failed too), and its stored turns, read with the old decision, are reused.
        acted = [s.name for s in steps if s.position > step.position and (
            s.kind in EFFECT_KINDS and s.status not in
            (StepStatus.PENDING, StepStatus.SKIPPED, StepStatus.FAILED)
            or s.kind == definition.AGENT and s.status not in
            (StepStatus.PENDING, StepStatus.SKIPPED))]
        if acted:
            # Compensating alone ends the run (compensated), where asking again is refused:
            # a re-run from the decision asks the model again with new keys for what follows.
            return (f"{', '.join(acted)} already acted on this decision: re-run from "
                    f"{step.name} instead (compensate first if what they did should not "
                    "stand)")
    elif action == "reconcile_tool_call":
        # An agent step's tool call (runs.machine.transitions.agent_calls): the step is unknown
        # while one of its calls is.
        if step.kind != definition.AGENT or step.status != StepStatus.UNKNOWN or not any(
                c.status == ToolCallStatus.UNKNOWN for c in step.tool_calls.all()):
            return f"{where} has no tool call whose outcome is unknown"
    elif action in ("retry_tool_call", "compensate_tool_call", "cancel_tool_call"):
        return tool_call_step_refusal(action, run, step, workflow_def)
    elif action == "rerun_from_step":
        if paused_undo(run, steps, workflow_def) is not None:
            return (f"run {run.pk} is paused in its compensation: confirm the undo or "
                    "terminate it first")
        return rerun_step_refusal(run, step, steps)
    elif action == "confirm_compensation":
        paused = paused_undo(run, steps, workflow_def)
        if paused is None or paused.step.pk != step.pk:
            return f"no compensation waits for the undo of {step.name} to be confirmed"
    else:
        return f"{LABELS[action]} is not aimed at a step"
    return None

def undos_in_doubt(steps: list[Step]) -> list[str]:
    """The tool calls whose undo was sent and whose outcome was not recorded (a person's,
    or a crash between: in_flight.undo_unanswered), named as the console names them. Reads
    what a list page prefetched (step.tool_calls), or one query per agent step."""
    return [f"{s.name}: tool call {c.ref} ({c.tool})" for s in steps
            if s.kind == definition.AGENT for c in s.tool_calls.all()
            if c.generation == s.generation and undo_unanswered(c)]


def awaited_approval(run: Run, steps: list[Step]) -> str | None:
    """What `run`, waiting, waits for a person to approve, in words (an approval step, an
    attempt of a step with the stop verdict, a tool call of an agent step), or None. Read
    from the steps alone: a waiting step of these kinds waits for nothing else."""
    if run.status != RunStatus.WAITING:
        return None
    step = next((s for s in steps if s.status == StepStatus.WAITING
                 and s.kind in _APPROVED_KINDS), None)
    if step is None:
        return None
    if step.kind == definition.APPROVAL:
        return step.name
    if step.kind == definition.AGENT:
        return f"a tool call of {step.name}"
    return (f"attempt {step.attempt + 1} of {step.name} (the stop verdict: a person approves "
            "each attempt)")


# The kinds of step whose wait is for a person's decision (a sleep's and an event wait's
# are not).
_APPROVED_KINDS = (definition.APPROVAL, definition.AGENT, *EFFECT_KINDS)


# A state that allows only a few actions whatever the run's steps has them named. Of the
# many a run waiting or in attention may allow, which apply depends on its steps: the run's
# page (and run_action without an action) offers those, where a list of all would mislead.
_FEW = 3


def _run_in_its_state(run: Run) -> str:
    state = str(run.status)
    if run.status == ATTENTION and run.attention_reason:
        state += f": {run.get_attention_reason_display()}"
    return (f"run {run.pk} ({run.workflow_name} {run.business_key}): "
            f"{STATE_WORDS[run.status]} ({state})")


def decision_refusal(run: Run) -> str | None:
    """Why a person's decision on what `run` waits for (an approval step, a tool call) can
    no longer be applied to it, in the words of state_refusal, or None if it can. The
    approvals app records it on the request, where the approver reads it."""
    if allowed("decide_approval", run.status):
        return None
    return f"the decision cannot be applied to {_run_in_its_state(run)}"


def state_refusal(action: str, run: Run) -> str | None:
    """Why operator action `action` is not possible from `run`'s state, in words, or None if
    the transition table allows it from there. operator_transition asks it before the
    table's own check, whose words name the transition as the code does."""
    if allowed(action, run.status):
        return None
    said = f"{LABELS[action]} is not possible for {_run_in_its_state(run)}"
    instead = [label for name, label in LABELS.items() if allowed(name, run.status)]
    if 0 < len(instead) <= _FEW:
        named = instead[0] if len(instead) == 1 else \
            f"{', '.join(instead[:-1])} or {instead[-1]}"
        said += f"; in that state only {named} can be taken"
    return said


def held_to_settle(action: str, status: str, attention_reason: str) -> bool:
    """Whether a run in `status` (for `attention_reason`) refuses `action` as one ended while
    an effect was unsettled (kernel.end_or_hold): it waits only for each to be settled."""
    return (status == ATTENTION and attention_reason == AttentionReason.ENDED_UNSETTLED
            and action not in SETTLE_ACTIONS)


def table_accepts(action: str) -> Q:
    """The runs the transition table lets `action` start from, as a filter."""
    return Q(status__in=[s for s in RunStatus.values if allowed(action, s)])


def held_to_settle_filter(action: str) -> Q:
    """held_to_settle as a filter: the runs the table lets `action` start from that it
    refuses because they were ended with an effect unsettled (none: a filter matching no
    run)."""
    held = Q(pk__in=[])
    for status in [s for s in RunStatus.values if allowed(action, s)]:
        refused = [r for r in AttentionReason.values if held_to_settle(action, status, r)]
        if refused:
            held |= Q(status=status, attention_reason__in=refused)
    return held


def state_accepts(action: str) -> Q:
    """The runs whose state lets `action` be taken, as a filter: those the transition table
    lets it start from (table_accepts), but those held_to_settle refuses; refusal() asks
    both of one run, and a bulk preview counts by this (approvals.bulk_counts), so that its
    count is the runs that will not be refused for their state (Resume's, those waiting for
    a person's approval: awaited_approval)."""
    accepted = table_accepts(action) & ~held_to_settle_filter(action)
    if action == "resume":
        # awaited_approval's rule, as a filter: a waiting run whose waiting step is one of
        # the kinds whose wait is for a person's decision.
        accepted &= ~(Q(status=RunStatus.WAITING) & Q(Exists(Step.objects.filter(
            run=OuterRef("pk"), status=StepStatus.WAITING, kind__in=_APPROVED_KINDS))))
    return accepted


def refusal(action: str, run: Run, steps: list[Step], workflow_def: definition.Workflow | None, *,
            step: Step | None = None) -> str | None:
    """Why the operator action `action` cannot succeed on `run` (aimed at `step`, for the
    actions that take one), or None if it can. Without `step`, a step action can succeed if
    any step of the run qualifies."""
    if (refused := state_refusal(action, run)) is not None:
        return refused
    if held_to_settle(action, run.status, run.attention_reason):
        names = "; ".join(str(e) for e in unsettled_effects(steps))
        return (f"run {run.pk} was ended and waits only for its unsettled effects to be "
                f"settled (reconcile): {names}")
    if action in FORWARD_ACTIONS and (any(s.status in _UNDO_STARTED for s in steps)
                                      or paused_undo(run, steps, workflow_def)):
        return (f"run {run.pk} is being compensated: carry the compensation on (confirm, "
                "compensate) or terminate it; it does not go forward again")
    if action in FORWARD_ACTIONS:
        in_doubt = undos_in_doubt(steps)
        if in_doubt:
            return (f"the undo of {', '.join(in_doubt)} was sent but its outcome is not "
                    f"recorded: send it again with its key ({LABELS['compensate_tool_call']}) "
                    "first, so that the run never goes on with an undo half done")
    if action == "resume" and (awaited := awaited_approval(run, steps)) is not None:
        return (f"run {run.pk} waits for a person's approval of {awaited}: its approvers "
                "decide it from its approval request, and their decision moves the run on. "
                "Resumed, it would only wait for the same approval again; to stop the run "
                "instead, cancel or terminate it")
    if action == "compensate":
        if workflow_def is None:
            return (f"{run.workflow_name} v{run.workflow_version} is not registered: its "
                    "compensations are unknown")
        unknown = [s.name for s in steps if s.status == StepStatus.UNKNOWN]
        if unknown:
            return (f"settle {', '.join(unknown)} first: compensation starts only once it is "
                    "known whether the original action happened")
        paused = paused_undo(run, steps, workflow_def)
        if paused is not None:
            return (f"the compensation is under way, paused at the undo of {paused}: "
                    "confirm it to carry on")
        if not compensation_plan(steps, workflow_def):
            return f"run {run.pk} has no completed step to compensate"
    if action in ("event_received", "skip_event") and not any(
            s.kind == definition.EVENT and s.status == StepStatus.WAITING for s in steps):
        return f"run {run.pk} does not wait for an event"
    if action == "event_received":
        awaited = next(s for s in steps
                       if s.kind == definition.EVENT and s.status == StepStatus.WAITING)
        if definition.step_of(workflow_def, awaited.name) is None:
            return (f"{run.workflow_name} v{run.workflow_version} here has no step "
                    f"{awaited.name!r}, which the run waits on for its event (a release "
                    "renamed or removed it): its payload cannot be checked and nothing was "
                    "delivered; deploy the code that has the step, then deliver the event")
    if action == "wake_timer" and not any(s.kind == definition.SLEEP
                                          and s.status == StepStatus.WAITING
                                          for s in steps):
        return f"run {run.pk} is not sleeping on a timer"
    if action == "confirm_compensation" and paused_undo(run, steps, workflow_def) is None:
        return f"run {run.pk} is not paused at the undo of a high-impact step or tool call"
    if action in STEP_ACTIONS:
        if step is not None:
            return step_refusal(action, run, step, steps, workflow_def)
        if not eligible_steps(action, run, steps, workflow_def):
            return f"no step of run {run.pk} can be its target"
    return None

def eligible_steps(action: str, run: Run, steps: list[Step],
                   workflow_def: definition.Workflow | None) -> list[Step]:
    """The steps `action` can be aimed at (empty for actions on the whole run)."""
    if action not in STEP_ACTIONS:
        return []
    if action == "rerun_from_step":
        # The rules read the whole run: once, not once per step (quadratic in a long run).
        if paused_undo(run, steps, workflow_def) is not None:
            return []
        return rerun_steps(steps)
    return [s for s in steps if step_refusal(action, run, s, steps, workflow_def) is None]


@dataclass(frozen=True)
class Checked:
    """A run as checked before an action's own work: the fields of operator.Operation that
    the checks read, without the change (nothing is locked or written yet)."""

    run: Run
    steps: list[Step]
    step: Step | None
    definition: definition.Workflow | None


def named_target(action: str, run: Run, step_name: str | None, call_ref: str) -> None:
    """The tool call `call_ref` of `step_name` that `action` is aimed at, checked before
    anything of the run's or the step's state, which say nothing of a call the person named
    wrongly ("did not stop on a failed tool call", "only Cancel or Terminate"): a step or a
    call the run does not have is told as such, naming it (NoSuchStep, TransitionNotAllowed),
    and so is a call in a state the action never starts from (call_state_refusal), with the
    calls of its step the action can be aimed at now."""
    if action not in (*TOOL_CALL_ACTIONS, *CALL_OPTIONAL_ACTIONS) or not call_ref:
        return
    try:
        step, call = call_named(run, step_name or "", call_ref)
    except TransitionNotAllowed:
        if not Step.objects.filter(run=run, name=step_name).exists():
            raise NoSuchStep(f"run {run.pk} has no step {quoted(step_name)}") from None
        raise
    if (wrong := call_state_refusal(action, step, call)) is not None:
        open_now = calls_open_said(action, step, _calls_open_to(action, run, step))
        raise TransitionNotAllowed(f"{wrong}; {open_now}")


def _calls_open_to(action: str, run: Run, step: Step) -> list[ToolCall]:
    """The calls of `step` that `action` can be aimed at now: none where checked() refuses
    it the step, else those call_refusal allows (confirm_compensation: the one paused at)."""
    try:
        found = checked(action, run, step.name)
    except TransitionNotAllowed:
        return []
    if action == "confirm_compensation":
        return [paused_undo(run, found.steps, found.definition).call]
    return calls_allowed(action, run, found.step, found.definition)


def first_refusal(action: str, run: Run, step_name: str | None = None,
                  call_ref: str = "") -> str | None:
    """Why `action` is refused before its own rules are asked, or None: the tool call it
    names (named_target, which raises), then the run's state (state_refusal, in words)."""
    named_target(action, run, step_name, call_ref)
    return state_refusal(action, run)


def checked(action: str, run: Run, step_name: str | None = None,
            call_ref: str = "") -> Checked:
    """The run's steps, the named step and its workflow, if `action` may be taken on `run`
    (refusal()), aimed at `call_ref` where it names a tool call (named_target, first);
    TransitionNotAllowed with the reason otherwise. What operator_transition checks under
    the lock, and check_before_work before it."""
    named_target(action, run, step_name, call_ref)
    steps = steps_of(run)
    step = None
    if step_name is not None:
        step = next((s for s in steps if s.name == step_name), None)
        if step is None:
            raise NoSuchStep(f"run {run.pk} has no step {quoted(step_name)}")
    workflow_def = definition.registry.get(run.workflow_name, run.workflow_version)
    refused = refusal(action, run, steps, workflow_def, step=step)
    if refused:
        raise TransitionNotAllowed(refused)
    return Checked(run, steps, step, workflow_def)


def require_action_reason(action: str, reason: str) -> None:
    """The reason every operator action needs, asked before any lock; a refusal names the
    action as the console's button labels it ("Terminate needs a reason")."""
    require_reason(reason, LABELS[action])


def check_before_work(action: str, run_id: int, *, reason: str,
                      step_name: str | None = None, call_ref: str = "") -> Checked:
    """The checks of operator.operator_transition (a reason, then checked()), made without
    a lock by an action that does work of its own before its transition: asks another
    system by key, or builds what an undo will send. A run that would refuse the action is
    refused here, before anything is asked or built; the transition checks again under the
    lock, for a run that moved on meanwhile. Raises TransitionNotAllowed (ReasonRequired)
    with the transition's own words."""
    require_action_reason(action, reason)
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise TransitionNotAllowed(f"run {run_id} does not exist")
    return checked(action, run, step_name, call_ref)
