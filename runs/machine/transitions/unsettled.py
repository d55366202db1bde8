"""Effects whose outcome is unknown when a person ends a run, and what ending it then
means: the run stays with a person, with its own reason, until each one is settled."""

from dataclasses import dataclass

from django.db.models import F

from ...definitions import definition
from ...models import AttentionReason, RunStatus, Step, StepStatus


@dataclass(frozen=True)
class Effect:
    """An effect in another system, named for people: a step's, or one tool call of an agent
    step, with its state in words."""

    name: str
    status: str
    state: str
    step: str

    def __str__(self) -> str:
        return f"{self.name}: {self.state}"


def may_have_acted(call) -> bool:
    """Whether an unknown outcome of tool call `call` may stand for an effect elsewhere: any
    call's but a read's (a read in flight when its run was terminated changed nothing
    elsewhere); a call of no recorded kind (a tool no longer declared) may have acted."""
    return call.kind != definition.READ


def unknown_calls(steps: list[Step]) -> list:
    """The tool calls (ToolCall rows) of the agent steps among `steps` whose outcome is
    unknown, of each step's current generation only (a re-run's earlier ones are history,
    not acted on: tool_call_rules.call_refusal). Those that may have acted elsewhere come
    first, then reads; each in the order the model asked for them. One query, none without
    an agent step."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    agents = [s.pk for s in steps if s.kind == definition.AGENT]
    if not agents:
        return []
    calls = ToolCall.objects.filter(step_id__in=agents, generation=F("step__generation"),
                                    status=ToolCallStatus.UNKNOWN).order_by(
        "step_id", "turn", "index")
    return sorted(calls, key=lambda c: not may_have_acted(c))


def unsettled_calls(steps: list[Step]) -> list:
    """The unknown tool calls among `steps`' agent steps (unknown_calls) that may have acted
    elsewhere: each is settled (a lookup or a person) before the run can end. The one rule
    of which calls hold a run's end: the end (unsettled_effects) and the next step the
    console offers (runs.operator.guidance) name the same calls."""
    return [c for c in unknown_calls(steps) if may_have_acted(c)]


def unsettled_effects(steps: list[Step]) -> list[Effect]:
    """The effects of the run whose outcome is unknown (they may have happened): its write
    and notify steps, and the tool calls of its agent steps that hold it (unsettled_calls)."""
    unknown = "outcome unknown: may have happened"
    found = [Effect(s.name, s.status, unknown, s.name) for s in steps
             if s.kind in (definition.WRITE, definition.NOTIFY) and s.status == StepStatus.UNKNOWN]
    agents = {s.pk: s.name for s in steps if s.kind == definition.AGENT}
    found += [Effect(f"{agents[c.step_id]}: tool call {c.ref} {c.tool}", c.status, unknown,
                     agents[c.step_id]) for c in unsettled_calls(steps)]
    return found


def end_or_hold(change, unsettled: list[Effect], *, message: str = "",
                settled: tuple[str, str] | None = None) -> None:
    """End a run a person ended: terminated, unless an effect is still unsettled; then it
    stays in attention with its own reason until each is settled (a lookup or a person).
    `message`: the ending's words; or `settled`: (the effect, the verdict) a settling just
    recorded, said as the last of them only when none remains."""
    if settled is not None:
        what, verdict = settled
        message = (f"{what} recorded as {verdict}" if unsettled
                   else f"every effect settled ({what}: {verdict})")
    if unsettled:
        names = "; ".join(str(e) for e in unsettled)
        change.move(RunStatus.ATTENTION, reason=AttentionReason.ENDED_UNSETTLED,
                    message=f"ended ({message}); not settled yet: {names}")
    else:
        change.move(RunStatus.TERMINATED, message=message)
