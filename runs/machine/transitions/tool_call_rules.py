"""When an operator action can be aimed at one tool call of an agent step (reconcile,
retry, undo): the rules the transitions of agent_operator and agent_calls check under the
run's lock, and that operator_rules.refusal and the console ask before offering them. Reads
nothing but the step's calls and turns, and call_refusal reads nothing at all."""

from django.db.models import F, Subquery
from pydantic import ValidationError

from audit.quoting import quoted

from ...agent_models import AgentTurn, ToolCall, ToolCallStatus
from ...definitions import definition
from ...definitions.input_errors import input_errors_text
from ...models import ErrorClass, Run, Step, StepStatus
from .. import sensitive
from ..errors import TransitionNotAllowed
from ..storable import whole_number
from .in_flight import EFFECT_STANDS
from .kernel import ATTENTION, WAITING
from .operator_words import CALL_STATE_WORDS

S = ToolCallStatus
# A call in one of these states still needs its tool: to be sent, waited on or settled by key.
NEEDS_TOOL = frozenset({S.PENDING, S.SCHEDULED, S.WAITING, S.UNKNOWN})
# A call in one of these states is not settled: the agent works it before the model is asked
# for another turn.
OPEN = NEEDS_TOOL | {S.RUNNING}

# The actions of the table (runs.operator.actions) that are aimed at one tool call.
TOOL_CALL_ACTIONS = ("reconcile_tool_call", "retry_tool_call", "compensate_tool_call",
                     "cancel_tool_call")
# Actions aimed at a step that may name one of its tool calls: the undo a compensation paused
# at is a step's or one tool call's, confirmed by the one action.
CALL_OPTIONAL_ACTIONS = ("confirm_compensation",)
# A call in one of these states has not run and can be cancelled by a person.
NOT_STARTED = frozenset({S.PENDING, S.SCHEDULED, S.WAITING})


def tool_of(workflow_def: definition.Workflow | None, step: Step,
            call: ToolCall) -> definition.ToolSpec | None:
    spec = definition.step_of(workflow_def, step.name)
    return spec.tools.get(call.tool) if isinstance(spec, definition.AgentSpec) else None


def call_named(run: Run, step_name: str, call_ref: str) -> tuple[Step, ToolCall]:
    """Tool call `call_ref` ("turn.index") of the current generation of `step_name` in
    `run`, with its step; TransitionNotAllowed naming the id where the run has no such call."""
    # TURN.INDEX in ASCII digits, as whole_number reads every number given from outside:
    # int() would read "١.٠" (and " 1.0", "1_0.0") as a call the person did not name.
    numbers = [whole_number(part, digits=9) for part in str(call_ref).split(".")]
    try:
        if len(numbers) != 2 or None in numbers:
            raise ValueError(call_ref)
        call = ToolCall.objects.select_related("step").get(
            step__run=run, step__name=step_name, generation=F("step__generation"),
            turn=numbers[0], index=numbers[1])
    except (ValueError, ToolCall.DoesNotExist):
        raise TransitionNotAllowed(f"run {run.pk} has no tool call {quoted(str(call_ref))} "
                                   f"in step {quoted(step_name)}") from None
    return call.step, call


# The states of a call each action aimed at one can start from, whatever its run's or
# its step's state (confirm_compensation: the call whose undo the compensation paused at),
# and a person's decision on its arguments (agent_operator.decide_tool_call).
DECIDE_TOOL_CALL = "decide_tool_call"
CALL_STATES = {
    "reconcile_tool_call": frozenset({S.UNKNOWN}),
    "retry_tool_call": frozenset({S.FAILED}),
    "compensate_tool_call": EFFECT_STANDS,
    "cancel_tool_call": NOT_STARTED,
    "confirm_compensation": frozenset({S.SUCCEEDED}),
    DECIDE_TOOL_CALL: frozenset({S.WAITING}),
}


def call_state_refusal(action: str, step: Step, call: ToolCall) -> str | None:
    """Why `action` cannot be aimed at `call` in the state it is in, naming that state in
    words, or None. Told before anything of the run's or the step's state
    (operator_rules.named_target), which says nothing of the call: a call settled once is
    settled whatever its run did next (queued, it refuses every action on a call)."""
    if action not in CALL_STATES or call.status in CALL_STATES[action]:
        return None
    where = f"tool call {call.ref} ({call.tool}) of {step.name}"
    state = f"{CALL_STATE_WORDS[call.status]} ({call.status})"
    if action == "cancel_tool_call" and call.status == S.CANCELLED:
        # Who cancelled it and why are in its record (the run's history, the call's error).
        return f"{where} is already cancelled; the run's history says by whom and why"
    if action == "reconcile_tool_call":
        if call.status not in OPEN:
            return f"{where} is already settled: {state}, so it has nothing to reconcile"
        return f"{where} has no unknown outcome to reconcile: {state}"
    if action == "retry_tool_call":
        return f"{where} did not fail: {state}"
    if action == "cancel_tool_call":
        return f"{where} can no longer be cancelled: {state}"
    if action == "compensate_tool_call":
        return f"{where} has no effect that stands to undo: {state}"
    if action == DECIDE_TOOL_CALL:
        return (f"{where} no longer waits for approval: {state}; this decision is for a "
                "request that no longer stands")
    return f"{where} has no undo waiting to be confirmed: {state}"


# What each action does to a call, as a refusal of one names the calls it applies to now.
_DONE_TO_CALL = {"reconcile_tool_call": "be reconciled", "retry_tool_call": "be retried",
                 "compensate_tool_call": "be undone", "cancel_tool_call": "be cancelled",
                 "confirm_compensation": "have its undo confirmed"}


def calls_open_said(action: str, step: Step, calls: list[ToolCall]) -> str:
    """The calls of `step` that `action` can be aimed at now, in words (none, too)."""
    done = _DONE_TO_CALL[action]
    if not calls:
        return f"no call of {step.name} can {done} now"
    named = ", ".join(f"{c.ref} ({c.tool})" for c in calls)
    return f"tool call{'s' if len(calls) > 1 else ''} {named} of {step.name} can {done} now"


def call_refusal(action: str, run: Run, step: Step, call: ToolCall,
                 tool: definition.ToolSpec | None,
                 *, last_turn: int) -> str | None:
    """Why `action` cannot be aimed at this one tool call, or None. `last_turn` is the index
    of the step's newest stored turn. Reads nothing: the console asks it for every call on
    the page."""
    where = f"tool call {call.ref} ({call.tool}) of {step.name}"
    if call.generation != step.generation:
        return (f"{where} belongs to generation {call.generation}, which a re-run replaced "
                f"(now {step.generation}): it is kept as history, not acted on")
    if action in TOOL_CALL_ACTIONS and (
            wrong := call_state_refusal(action, step, call)) is not None:
        return wrong
    if action == "cancel_tool_call":
        if run.status not in (ATTENTION, WAITING):
            return (f"run {run.pk} is {run.status}; a tool call is cancelled while its run "
                    "waits or is in attention")
        return None
    if run.status != ATTENTION:
        return f"run {run.pk} is {run.status}; a tool call is acted on while it is in attention"
    if action == "reconcile_tool_call":
        return None
    if action == "retry_tool_call":
        if call.error_class == ErrorClass.MODEL_FORMAT:
            return f"{where} is {call.status}; only a failed call is sent again"
        if step.status != StepStatus.FAILED:
            return f"{where} failed, but {step.name} did not stop on it"
        if last_turn > call.turn:
            return (f"the model already answered after {where} failed (turn {last_turn}): "
                    "sending it again now would not match the conversation")
        if tool is None:
            return f"{where}: the tool is no longer declared"
        return None
    if action == "compensate_tool_call":
        if not call.compensation_key:
            return (f"{where} declared no undo when it was made: none is sent under this "
                    "run, keyless")
        if tool is None or tool.compensate_fn is None:
            return f"{where}: the tool declares no compensation"
        problem = args_problem(tool, call)  # the undo is sent with them
        if problem:
            return f"{where} cannot be undone as the code stands: {problem}"
        # The impact the call was made with, as four eyes and the run's Compensate weigh
        # it: a release that lowered the tool's since does not lower what this call did.
        if call.impact == definition.HIGH:
            return (f"{where} is high impact: undo it with the run's Compensate, which a "
                    "second person approves and which pauses for a person to confirm")
        return None
    return f"{action} is not aimed at a tool call"


def calls_allowed(action: str, run: Run, step: Step,
                  workflow_def: definition.Workflow | None) -> list[ToolCall]:
    """The calls of `step` that call_refusal lets `action` be aimed at."""
    newest = last_turn(step)
    return [c for c in calls_of(step) if call_refusal(
        action, run, step, c, tool_of(workflow_def, step, c), last_turn=newest) is None]


def calls_of(step: Step) -> list[ToolCall]:
    """The tool calls of the step's current generation (a re-run's earlier ones are history)."""
    return list(ToolCall.objects.filter(step=step, generation=step.generation)
                .order_by("turn", "index"))


def newest_turn_calls(step: Step) -> list[ToolCall]:
    """The calls of the newest turn of the step's current generation that asked for any.
    The model is asked for a turn only once every call before it is settled, so the calls
    still to send, wait on or settle are among these (at most a turn's bound of them): the
    agent's loop reads these before each call, not every call of the step (calls_of), which
    made an agent of thousands of calls read millions of rows."""
    mine = ToolCall.objects.filter(step=step, generation=step.generation)
    newest = mine.order_by("-turn").values("turn")[:1]
    return list(mine.filter(turn=Subquery(newest)).order_by("index"))


def counted_before(step: Step, turn: int) -> int:
    """How many calls of the turns before `turn` take a place in the agent's tool-call
    budget (a call a person cancelled takes none, as agent_budgets.budget_spent counts)."""
    if turn == 0:
        return 0
    return ToolCall.objects.filter(step=step, generation=step.generation,
                                   turn__lt=turn).exclude(status=S.CANCELLED).count()


def unworkable_call(calls: list[ToolCall], spec: definition.AgentSpec, workflow: str, *,
                    compensating: bool = False) -> tuple[ToolCall, str] | None:
    """The first call that no rule can send, settle or undo as the code stands, with why;
    or None. A release changed the agent without a new version: it removed the tool a
    call still needs, narrowed its arguments' schema under a call not yet settled, or
    (compensating) removed the undo a call whose effect stands declared when it was made
    (its compensation key). Passing over such a call would leave its effect unsaid, and
    working it would fail at every try. `workflow` names the code ("name vN")."""
    in_worker = f"{workflow} in this worker"
    for call in calls:
        needs = call.status in EFFECT_STANDS and bool(call.compensation_key) if compensating \
            else call.status in NEEDS_TOOL
        if not needs:
            continue
        tool = spec.tools.get(call.tool)
        if tool is None:
            return call, f"{in_worker} declares no tool {call.tool!r}"
        if compensating and tool.compensate_fn is None:
            return call, f"{in_worker} declares no undo for tool {call.tool!r}, whose " \
                         "effect stands"
        problem = args_problem(tool, call)  # an undo is sent with them too
        if problem:
            return call, f"{in_worker}: {problem}"
    return None


def args_problem(tool: definition.ToolSpec, call: ToolCall) -> str | None:
    """Why the call's stored arguments no longer pass its tool's schema (fields and why,
    never the values), or None. Arguments that cannot be opened are no problem of the
    schema's: the work that opens them records it, as a failure (errors.classify)."""
    try:
        tool.args.model_validate(sensitive.opened(call.arguments))
    except ValidationError as exc:
        return (f"the call's stored arguments no longer match {tool.args.__name__}: "
                f"{input_errors_text(exc.errors())}")
    except sensitive.UnreadableValue:
        return None
    return None


def step_refusal(action: str, run: Run, step: Step,
                 workflow_def: definition.Workflow | None) -> str | None:
    """Why no tool call of `step` can be the target of `action`, or None if one can (for
    operator_rules.refusal). Reads the step's calls only for an agent step in a state the
    action can start from."""
    where = f"step {step.name} of run {run.pk}"
    if step.kind != definition.AGENT:
        return f"{where} is not an agent step"
    if action == "retry_tool_call" and step.status != StepStatus.FAILED:
        return f"{where} is {step.status}: it did not stop on a failed tool call"
    if action == "compensate_tool_call" and step.status in (StepStatus.PENDING,
                                                            StepStatus.SKIPPED):
        return f"{where} has not run: no tool call to undo"
    # step.tool_calls.all() is what a list page prefetched (runs.reads.selectors.steps_of), or
    # one query; a transition's fresh rows always query.
    wanted = {S.FAILED} if action == "retry_tool_call" else \
        NOT_STARTED if action == "cancel_tool_call" else EFFECT_STANDS
    calls = [c for c in step.tool_calls.all() if c.generation == step.generation
             and c.status in wanted and (
        action != "compensate_tool_call" or ((tool := tool_of(workflow_def, step, c)) is not None
                                             and tool.compensate_fn is not None))]
    newest = last_turn(step) if calls else -1
    refusals = [call_refusal(action, run, step, c, tool_of(workflow_def, step, c),
                             last_turn=newest) for c in calls]
    if None in refusals:
        return None
    # Say why the newest candidate is refused: it is the one a person most likely means.
    return refusals[-1] if refusals else \
        f"{where} has no tool call that {action.replace('_', ' ')} applies to"


def last_turn(step: Step) -> int:
    """The index of `step`'s newest stored turn (0 if none): read with the step by a list
    page (runs.reads.selectors.steps_of), else asked for."""
    if hasattr(step, "newest_turn"):
        return step.newest_turn or 0
    return AgentTurn.objects.filter(step=step, generation=step.generation).order_by(
        "-index").values_list(
        "index", flat=True).first() or 0
