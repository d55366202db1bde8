"""A drill's row in the drill table: passed, failed, or not exercised and why; and the
verdicts that judge a recovered run apart from the crash that made it."""

from collections.abc import Callable
from dataclasses import dataclass

from audit.actions import AuditAction
from audit.models import AuditRecord

from ..machine.errors import TransitionNotAllowed
from ..models import AgentTurn, Run, RunStatus
from .drill_evidence import calls_sent
from .drill_waits import event_not_made_up, unreached


@dataclass(frozen=True)
class DrillResult:
    drill: str
    expected: str
    observed: str
    passed: bool | None  # None: does not apply to this workflow, or was not exercised
    # False: it applies, but no worker reaches its crash point for want of a step to crash at.
    exercised: bool = True


def run_guarded(title: str, drill: Callable[..., DrillResult], *args) -> DrillResult:
    """One drill; what it could not do (a refused transition, a remote system that does not
    answer) is its failed row in the table, so the other drills still run and report."""
    try:
        return drill(*args)
    except Exception as exc:
        return failed(title, exc)


def failed(title: str, exc: Exception) -> DrillResult:
    name = "refused" if isinstance(exc, TransitionNotAllowed) else type(exc).__name__
    return DrillResult(title, "-", f"the drill could not finish: {name}: {exc}", False)


def not_exercised(title: str, expected: str, why: str) -> DrillResult:
    return DrillResult(title, expected, f"not exercised: {why}", None, exercised=False)


def short_of(title: str, expected: str, run: Run) -> DrillResult:
    """The row of a drill whose worker stopped short of its crash point: not exercised where
    `run` waits for an event the drill does not make up (the crash point lies behind it), a
    failure otherwise."""
    if (why := event_not_made_up(run)) is not None:
        return not_exercised(title, expected, why)
    return DrillResult(title, expected, unreached(run), False)


def went_through(run: Run) -> bool:
    """Whether recovered run `run` went as far as a drill takes it: completed, or waiting for
    an event the drill does not make up (what lies behind it is the drills' it is not)."""
    return run.status == RunStatus.COMPLETED or event_not_made_up(run) is not None


def restart_after_turn_verdict(run: Run, stored: list[tuple]) -> tuple[str, bool]:
    """Drill 5a's words and verdict on `run`, recovered after its worker was killed once the
    turns `stored` ((index, tool calls) of each) were stored: passed if those turns were
    reused, none asked of the model again, every tool call sent once (a call sent again
    after the restart is an effect that may be made twice) and the run went through."""
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index")
                 .values_list("index", "tool_calls"))
    reused = turns[:len(stored)] == stored
    asked_again = AuditRecord.objects.filter(run=run, action=AuditAction.AGENT_TURN_STORED,
                                             data__turn__lt=len(stored)).count() - len(stored)
    sent = calls_sent(run)
    repeated = {name: n for name, n in sent.items() if n != 1}
    calls = (f"{len(sent)} tool call{'' if len(sent) == 1 else 's'}, each sent once"
             if not repeated else
             "sent more than once: " + ", ".join(f"{name} {n}x"
                                                 for name, n in sorted(repeated.items())))
    passed = reused and asked_again == 0 and not repeated and went_through(run)
    return (f"{len(stored)} turn stored before the crash, {'reused' if reused else 'CHANGED'}; "
            f"{len(turns)} turns in all; {calls}; run {run.status}"), passed
