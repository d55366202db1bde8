"""When a run can be re-run from a chosen step (runs.machine.transitions.rerun), and which effects
already stand from there on: read by operator_rules.refusal and by the dialog."""

from dataclasses import dataclass
from functools import cached_property

from django.db.models import F

from ...agent_models import ToolCall, ToolCallStatus
from ...definitions import definition
from ...models import Run, Step, StepStatus
from .kernel import DONE_STEP_STATUSES, Effect

# The states in which a step's effect stands in another system (not undone).
_STANDS = {
    StepStatus.SUCCEEDED: "succeeded",
    StepStatus.UNKNOWN: "outcome unknown: may have happened",
    StepStatus.COMPENSATION_FAILED: "undo failed: still stands",
}


def rerun_range(steps: list[Step], step: Step) -> list[Step]:
    """The steps a re-run from `step` sends again: it and the later ones."""
    return [s for s in steps if s.position >= step.position]


_CALL_STANDS = {
    ToolCallStatus.SUCCEEDED: "succeeded",
    ToolCallStatus.UNKNOWN: "outcome unknown: may have happened",
    ToolCallStatus.COMPENSATION_FAILED: "undo failed: still stands",
}
# A call in one of these states may have acted and is not settled: a re-run would leave it
# behind unfinished. (A call that never ran, pending or waiting for approval, is cancelled
# by the re-run: rerun.NEVER_RAN.)
_CALL_UNSETTLED = {
    ToolCallStatus.UNKNOWN: "its outcome is unknown",
    ToolCallStatus.RUNNING: "it is in flight",
    ToolCallStatus.COMPENSATING: "it is being undone",
}


def _calls(steps: list[Step], states) -> list[tuple[Step, ToolCall]]:
    """The calls in `states` of the current generation of the agent steps among `steps`
    (one query, none without an agent step)."""
    agents = {s.pk: s for s in steps if s.kind == definition.AGENT}
    if not agents:
        return []
    calls = ToolCall.objects.filter(
        step_id__in=list(agents), generation=F("step__generation"), status__in=list(states)
    ).order_by("step_id", "turn", "index").only(
        "step_id", "generation", "turn", "index", "tool", "kind", "impact", "status",
        "idempotency_key", "remote_ref")
    return [(agents[c.step_id], c) for c in calls]


def standing_effects(steps: list[Step], step: Step) -> list[Effect]:
    """The effects (writes and notifications, any impact) that already stand from `step` on:
    a re-run sends each again with a new key, it does not undo them. An agent step's are its
    tool calls': the re-run starts its conversation afresh, and the model may ask for them
    again."""
    sent_again = rerun_range(steps, step)
    found = [Effect(s.name, s.status, f"{_STANDS[s.status]} ({s.impact} impact, key "
                                      f"{s.idempotency_key[:12]}..., "
                                      f"ref {s.remote_ref or 'none'})", s.name)
             for s in sent_again
             if s.kind in (definition.WRITE, definition.NOTIFY) and s.status in _STANDS]
    # A call of no recorded kind (a tool no longer declared) may have acted elsewhere.
    found += [Effect(f"{agent.name}: tool call {c.ref} {c.tool}", c.status,
                     f"{_CALL_STANDS[c.status]} ({c.impact or 'unknown'} impact, key "
                     f"{c.idempotency_key[:12]}..., ref {c.remote_ref or 'none'})", agent.name)
              for agent, c in _calls(sent_again, _CALL_STANDS)
              if c.kind in (definition.WRITE, definition.NOTIFY) or not c.kind]
    return found


@dataclass(frozen=True)
class RerunBounds:
    """What decides, for the whole run at once, from which steps it can be re-run: read in
    one pass over its steps (and, only when a step passes the other rules with an agent step
    at or after it, one query for the agent steps' calls), so that listing the steps a
    re-run can start from costs one pass, not one pass per step."""

    first_unfinished: int | None  # position of the first step not done
    last_unknown: int | None  # position of the last step whose outcome is unknown
    compensating: bool
    last_agent: int | None  # position of the last agent step
    steps: list[Step]

    @cached_property
    def unsettled(self) -> list[tuple[Step, ToolCall]]:
        """The agent steps' calls a re-run would leave behind. Read when first asked: a
        list of many runs (the attention page) asks it of none whose other rules refuse."""
        return _calls(self.steps, _CALL_UNSETTLED)

    def refuses(self, step: Step) -> str | None:
        """Which rule refuses a re-run from `step` (a word), or None if none does."""
        if self.first_unfinished is not None and self.first_unfinished < step.position:
            return "earlier"
        if self.last_unknown is not None and self.last_unknown >= step.position:
            return "unknown"
        if self.compensating:
            return "compensating"
        if self.last_agent is not None and self.last_agent >= step.position and any(
                agent.position >= step.position for agent, _ in self.unsettled):
            return "unsettled"
        return None


def rerun_bounds(steps: list[Step]) -> RerunBounds:
    unfinished = [s.position for s in steps if s.status not in DONE_STEP_STATUSES]
    unknown = [s.position for s in steps if s.status == StepStatus.UNKNOWN]
    agents = [s.position for s in steps if s.kind == definition.AGENT]
    return RerunBounds(
        first_unfinished=min(unfinished, default=None),
        last_unknown=max(unknown, default=None),
        compensating=any(s.status == StepStatus.COMPENSATING for s in steps),
        last_agent=max(agents, default=None), steps=steps)


def rerun_steps(steps: list[Step]) -> list[Step]:
    """The steps the run can be re-run from (as far as these rules go: operator_rules adds
    a compensation paused for a person)."""
    bounds = rerun_bounds(steps)
    return [s for s in steps if bounds.refuses(s) is None]


def rerun_step_refusal(run: Run, step: Step, steps: list[Step]) -> str | None:
    """Why the run cannot be re-run from `step`, or None if it can."""
    where = f"step {step.name} of run {run.pk}"
    bounds = rerun_bounds(steps)
    rule = bounds.refuses(step)
    if rule == "earlier":
        earlier = [s.name for s in steps if s.position < step.position
                   and s.status not in DONE_STEP_STATUSES]
        return (f"{where}: the earlier steps {', '.join(earlier)} did not succeed, so their "
                "results cannot be reused; re-run from the first of them")
    if rule == "unknown":
        unknown = [s.name for s in rerun_range(steps, step) if s.status == StepStatus.UNKNOWN]
        return (f"settle {', '.join(unknown)} first (reconcile): whether its effect happened "
                "decides whether sending it again with a new key does it twice")
    if rule == "compensating":
        return f"run {run.pk} is being compensated: let the compensation finish first"
    if rule == "unsettled":
        # The same rule for an agent step's tool calls as for a step: a re-run leaves none
        # of them unsettled behind it (its new conversation would not know how they ended).
        unsettled = [f"tool call {c.ref} {c.tool} of {agent.name} ({_CALL_UNSETTLED[c.status]})"
                     for agent, c in bounds.unsettled if agent.position >= step.position]
        return (f"settle {'; '.join(unsettled)} first (reconcile it, or let its undo "
                "finish): whether its effect happened decides whether the "
                "re-run's new conversation does it twice")
    return None
