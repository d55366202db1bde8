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


def unsettled_effects(steps: list[Step]) -> list[Effect]:
    """The effects of the run whose outcome is unknown (they may have happened): its write
    and notify steps, and the tool calls of its agent steps but reads (a read's unknown
    outcome, in flight when the run was terminated, changed nothing elsewhere)."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    unknown = "outcome unknown: may have happened"
    found = [Effect(s.name, s.status, unknown, s.name) for s in steps
             if s.kind in (definition.WRITE, definition.NOTIFY) and s.status == StepStatus.UNKNOWN]
    agents = {s.pk: s.name for s in steps if s.kind == definition.AGENT}
    if agents:
        found += [Effect(f"{agents[c.step_id]}: tool call {c.ref} {c.tool}", c.status, unknown,
                         agents[c.step_id])
                  for c in ToolCall.objects.filter(step_id__in=list(agents),
                                                   generation=F("step__generation"),
                                                   status=ToolCallStatus.UNKNOWN)
                  .exclude(kind=definition.READ).order_by("step_id", "turn", "index")]
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
