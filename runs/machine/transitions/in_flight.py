"""Effects in flight when their worker stopped or a person ended their run: what each
becomes (taken_back, ended_in_flight), the tool calls an agent step left running, and how an
agent step not done ends with its run. Shared by the lease take-back and terminate_in. And
what an undo left compensating becomes where its compensation stops with nothing to carry
it on (not_undone; an agent step's calls, calls_not_undone): shared by a failed undo
(effects.undo_outcome), the hold at an undo a release removed
(compensation.hold_undo_missing) and a run a person ends (undos_left), where an undo sent
and never answered is in doubt (undo_unanswered), whoever holds the lease."""

from django.db.models import F

from ...definitions import definition
from ...models import ErrorClass, Step, StepStatus
from .attempts import intent_of

IN_FLIGHT_AT_END = "in flight when the run was terminated"
# An agent step none of whose calls was in flight at the end, one of them unknown before it
# (its lookups failed, or a take-back left it so): it was not in flight then.
CALL_UNKNOWN_AT_END = "a tool call's outcome unknown when the run was terminated"
# A tool call in one of these states has an effect in another system (not yet undone).
EFFECT_STANDS = frozenset({StepStatus.SUCCEEDED, StepStatus.COMPENSATING,
                           StepStatus.COMPENSATION_FAILED})


def compensation_order(calls: list) -> list:
    """Of an agent step's calls (tool_call_rules.calls_of), those to undo, newest first:
    those whose effect stands and that declared an undo when they were made (their
    compensation key: an undo a release removed since stops the compensation,
    tool_call_rules.unworkable_call). Here, below the kernel, so that a run's end
    (undos_left) weighs an agent step's calls by the rule its compensation works through."""
    calls = [c for c in calls if c.compensation_key and c.status in EFFECT_STANDS]
    return sorted(calls, key=lambda c: (c.finished_at or c.updated_at, c.turn, c.index),
                  reverse=True)

def ended_in_flight(row, kind: str, why: str) -> None:
    """An effect (a step's, or a tool call's) in flight when a person ended its run: its
    outcome is unknown whatever its kind, and its result, when it arrives, is recorded on it
    (late_outcomes.late_result). Only one that may have acted elsewhere keeps the run from ending
    (unsettled.unsettled_effects); a read's is evidence only. An agent step's are its
    calls' (end_agent_step)."""
    row.status = StepStatus.UNKNOWN
    row.error_class, row.error_message = ErrorClass.UNKNOWN, why


def taken_back(row, kind: str, why: str) -> None:
    """An effect (a step's, or a tool call's) left running by a worker that stopped before
    recording its outcome: one that may have acted elsewhere (a write, a notify, or a call
    of no recorded kind) is unknown, settled by its key next; anything else changed nothing
    and runs again."""
    if kind in (definition.WRITE, definition.NOTIFY) or not kind:
        row.status = StepStatus.UNKNOWN
        row.error_class, row.error_message = ErrorClass.UNKNOWN, why
    else:
        row.status = StepStatus.PENDING


def release_calls_in_flight(change, step: Step, *, why: str, action: str,
                            calls: list | None = None, settle=taken_back) -> list:
    """Tool calls of agent step `step` left running, settled by the rule a step's own effect
    follows in the same case (`settle`): taken back from a worker that stopped before
    recording an outcome (taken_back), or in flight when the run was terminated
    (ended_in_flight). Each one gets its audit record, `action`. `calls`: those the caller
    read as running, or (None) the step's calls running now. Returns those it settled."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    if calls is None:
        calls = ToolCall.objects.filter(step=step, generation=step.generation,
                                        status=ToolCallStatus.RUNNING)
    for call in calls:
        settle(call, call.kind, why)
        call.updated_at = change.now
        call.save(update_fields=["status", "error_class", "error_message", "updated_at"])
        change.audit(action, step=step, before={"call_status": ToolCallStatus.RUNNING},
                     after={"call_status": call.status},
                     data={"tool_call": call.ref, "tool": call.tool, **intent_of(call),
                           **({"error": why} if call.status == ToolCallStatus.UNKNOWN else {})})
    return list(calls)


def end_agent_step(change, step: Step, *, action: str) -> None:
    """An agent step not done when a person ended its run (terminate, cancel). Its calls
    left running, pending after a take-back too, are settled as any effect in flight; the
    step is unknown while one of its calls is (its own model turn is no effect), and ended
    (failed) once it ran: never skipped with calls that acted, nor unknown with nothing
    left to settle. Its error says whether a call was in flight at the end or only unknown
    then (CALL_UNKNOWN_AT_END)."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    released = release_calls_in_flight(change, step, action=action, why=IN_FLIGHT_AT_END,
                                       settle=ended_in_flight)
    not_started = step.status in (StepStatus.PENDING, StepStatus.SCHEDULED)
    # All its calls, not only those released now: a take-back may have made one unknown.
    calls = list(ToolCall.objects.filter(step=step, generation=step.generation)
                 .values_list("status", flat=True))
    if ToolCallStatus.UNKNOWN in calls:
        in_flight = any(call.status == ToolCallStatus.UNKNOWN for call in released)
        ended_in_flight(step, definition.WRITE,
                        IN_FLIGHT_AT_END if in_flight else CALL_UNKNOWN_AT_END)
    elif step.status == StepStatus.RUNNING or not_started and calls:
        step.error_message = "ended by a person before it finished" if not_started \
            else IN_FLIGHT_AT_END
        step.status, step.error_class = StepStatus.FAILED, ""
    elif not_started:
        step.status, step.finished_at = StepStatus.SKIPPED, None  # unfinished: see reopen
    else:
        return  # waiting for a person, or unknown with a call to settle: as it stands
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = "", None
    change.step_changed(step)


def not_undone(row) -> bool:
    """A step's or a tool call's undo, left compensating where a compensation stopped with
    nothing to carry it on, put in the state that says what stands. True if it changed.

    Never sent (a person confirmed a high-impact undo; nothing went out): the effect stands
    as before the compensation, succeeded, and a new compensation asks the person again,
    showing what the code then sends. Sent and due again (it failed, or its outcome is
    unknown): the undo failed, as when its resends are spent (effects.undo_outcome), and
    compensating again sends it again with its key. An agent step's own intent counts as
    sent: its state before is not kept, and its calls say what stands."""
    if row.status != StepStatus.COMPENSATING:
        return False
    row.status = StepStatus.COMPENSATION_FAILED if row.compensation_attempt \
        else StepStatus.SUCCEEDED
    row.next_attempt_at = None
    return True


def undo_unanswered(row) -> bool:
    """Whether the undo of `row` (a step's, or a tool call's) was sent and never answered:
    its intent is checkpointed (compensating, its attempt counted), committed before the
    undo is sent, and no outcome came after it; an outcome either ends the undo or, failed
    and to be sent again, makes it due at a time (next_attempt_at, until its next intent).
    Being sent now or left by a worker that died sending it, such an undo may have landed:
    the one test of an undo in flight, whoever holds the lease. An undo a person confirmed
    and nothing sent yet is not one; nor is an agent step's own intent (agent_undo_ended)."""
    return (row.status == StepStatus.COMPENSATING and row.compensation_attempt > 0
            and row.next_attempt_at is None)


def undos_left(change, steps: list[Step]) -> dict[str, str]:
    """A run a person ends (terminate_in) keeps no step or tool call compensating: nothing
    will send its undo again, nor record the outcome of one being sent (its worker is fenced
    off: the result is kept as evidence only, late_outcomes.late_result). Each is put in the state
    that says what stands (not_undone): an undo sent and never answered (undo_unanswered)
    counts as sent, its outcome unknown, as an effect in flight at the end is
    (ended_in_flight); an agent step's is its calls' (agent_undo_ended). Returns each one
    changed, by name, with its state now, for the run's record. One query for all the agent
    steps' calls."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    left = {}
    by_step: dict[int, list] = {s.pk: [] for s in steps if s.kind == definition.AGENT}
    if by_step:
        # All of them: whether one still stands decides what the step's undo is.
        for call in (ToolCall.objects.filter(step_id__in=list(by_step),
                                             generation=F("step__generation"))
                     .order_by("step_id", "turn", "index")):
            by_step[call.step_id].append(call)
    for step in steps:
        if step.kind == definition.AGENT:
            calls = by_step[step.pk]
            for call in calls_not_undone(change, step, unanswered=ENDED_UNANSWERED, calls=[
                    c for c in calls if c.status == ToolCallStatus.COMPENSATING]):
                left[f"{step.name}: tool call {call.ref} {call.tool}"] = call.status
            changed = agent_undo_ended(step, calls)
        else:
            changed = undo_ended(
                step, in_doubt=ENDED_UNANSWERED if undo_unanswered(step) else None)
        if changed:
            # An agent step holds the lease while it carries its calls' undos; nothing does now.
            step.lease_owner, step.lease_expires_at = "", None
            change.step_changed(step)
            left[step.name] = step.status
    return left


def undo_in_doubt_at_end(row) -> bool:
    """Whether `row`'s undo was in flight when its run was ended (undo_ended): the one
    whose outcome, when its sender brings it, settles the row (late_outcomes.late_result, and
    agent_operator.record_tool_call_undo for a person's undo of one call)."""
    return (row.status == StepStatus.COMPENSATION_FAILED
            and row.error_class == ErrorClass.ENDED_IN_DOUBT)


def undo_in_doubt(call) -> bool:
    """Whether a tool call leaves its agent step's undo in doubt after a run's end: its own
    undo is (undo_in_doubt_at_end), or it may have acted (unknown), or it is still being
    undone. A call whose undo failed otherwise stands, and says so itself: the step is then
    a failed undo, as the end makes it with no call in doubt (agent_undo_ended)."""
    return (call.status in (StepStatus.UNKNOWN, StepStatus.COMPENSATING)
            or undo_in_doubt_at_end(call))


ENDED_BEFORE_UNDONE = "ended by a person before every tool call of it was undone"
# What an undo sent and never answered says where its compensation stops with nothing to
# carry it on (undo_ended): at a person's end of the run, its sender's late answer settles
# it (late_outcomes.late_result); at a hold (undo_held), compensating again sends it again with
# its key.
ENDED_UNANSWERED = (ErrorClass.ENDED_IN_DOUBT, IN_FLIGHT_AT_END)
HELD_UNANSWERED = (ErrorClass.UNKNOWN, "its undo was sent and never answered: it may have "
                   "been undone")


def undone_by_calls(calls: list) -> str:
    """What an agent step's undo is, by its calls' (its undo is theirs): compensated once
    none of them has an undo to come (compensation_order, the calls its compensation
    undoes, and is done once none is left), else compensation failed, an effect of it
    standing. `calls`: those of the step's generation."""
    return StepStatus.COMPENSATION_FAILED if compensation_order(calls) \
        else StepStatus.COMPENSATED


def agent_undo_ended(step: Step, calls: list) -> bool:
    """not_undone for an agent step at a run's end, once its calls are (calls_not_undone):
    its undo is theirs, so it is in doubt while one of theirs is; otherwise it is what they
    say (undone_so_far, by undone_by_calls): compensated when none stands with an undo to
    come, else failed, ended by a person before every one of them was undone. `calls`: all
    its calls of its generation."""
    in_doubt = any(undo_in_doubt_at_end(call) for call in calls)
    if not undo_ended(step, in_doubt=ENDED_UNANSWERED if in_doubt else None):
        return False
    if step.status == StepStatus.COMPENSATION_FAILED and not in_doubt:
        undone_so_far(step, undone_by_calls(calls))
    return True


def undone_so_far(step: Step, status: str) -> None:
    """An agent step whose undo a person's end stopped, none of its calls in doubt: `status`
    is what its calls say (compensated, or compensation failed where one of them stands),
    with no error but why it failed. The step's own error (the call that failed forward, or
    a try of an undo) no longer says what stands: each call says its own."""
    if status == StepStatus.COMPENSATED:
        step.status, step.error_class, step.error_message = status, "", ""
    else:
        step.status, step.error_class = status, ErrorClass.ENDED_UNDOING
        step.error_message = ENDED_BEFORE_UNDONE


def undo_stopped_by_end(row) -> bool:
    """Whether the success of `row`'s undo, brought by its sender after a person ended the
    run, settles it (late_outcomes.late_result): an undo in doubt at the end
    (undo_in_doubt_at_end), or an agent step's whose calls the end found undone so far
    (undone_so_far): its worker brings the step's own success once the last of them was
    undone before the end."""
    return row.status == StepStatus.COMPENSATION_FAILED and row.error_class in (
        ErrorClass.ENDED_IN_DOUBT, ErrorClass.ENDED_UNDOING)


def undo_ended(row, *, in_doubt: tuple[str, str] | None,
               error: tuple[str, str] = ("", "")) -> bool:
    """not_undone, where nothing carries the undo on: an undo sent and never answered
    (`in_doubt`: its error class and message, ENDED_UNANSWERED or HELD_UNANSWERED) failed
    with its outcome unknown. `error`: a tool call's last failed try, which its agent step keeps
    (effects.undo_outcome records it there), and which says why its undo failed rather
    than an error of an earlier try the row still holds (bounded, as
    EffectRow.undo_failed bounds it)."""
    if not not_undone(row):
        return False
    if row.status != StepStatus.COMPENSATION_FAILED:
        return True
    if in_doubt:
        row.error_class, row.error_message = in_doubt
    elif error[1]:
        row.error_class = error[0] or ErrorClass.UNCLASSIFIED
        row.error_message = error[1][:2000]
    return True


def calls_not_undone(change, step: Step, *, unanswered: tuple[str, str] | None = None,
                     calls: list | None = None) -> list:
    """An agent step's undo is its calls': where it stops with nothing to carry it on (its
    undo failed, effects.undo_outcome; a hold at a lost undo,
    compensation.hold_undo_missing; a run's end, undos_left), no call of it is left
    compensating, which the run page and the API would read as an undo under way. Each is
    put in the state that says what stands (undo_ended), with the step's error, its last
    try's. `unanswered`: where the undo stops before anything answers (a run's end, a hold),
    an undo sent and never answered (undo_unanswered) has its outcome unknown, whatever
    error its step holds, and this error class and message; None: the caller records the
    answer that stops it (a failed undo). `calls`: the
    step's calls compensating, as the caller read them (None: read now). Returns those
    changed."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    if step.kind != definition.AGENT:
        return []
    if calls is None:
        calls = ToolCall.objects.filter(step=step, generation=step.generation,
                                        status=ToolCallStatus.COMPENSATING).order_by(
            "turn", "index")
    changed = [call for call in calls if undo_ended(
        call, in_doubt=unanswered if unanswered and undo_unanswered(call) else None,
        error=(step.error_class, step.error_message))]
    for call in changed:
        call.updated_at = change.now
        call.save(update_fields=["status", "next_attempt_at", "error_class",
                                 "error_message", "updated_at"])
    if changed:
        change.step_changed(step)
    return changed


def calls_due_again(change, step: Step) -> None:
    """An agent step's undo failed and is sent again when its step is due
    (effects.undo_outcome): the call whose undo answered so, left compensating to be sent
    again with its key, is due then too, which says it was answered (undo_unanswered): a
    run ended before it is sent again leaves it failed with that answer, not in doubt."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    if step.kind != definition.AGENT:
        return
    for call in ToolCall.objects.filter(step=step, generation=step.generation,
                                        status=ToolCallStatus.COMPENSATING):
        if undo_unanswered(call):
            call.next_attempt_at, call.updated_at = step.next_attempt_at, change.now
            call.save(update_fields=["next_attempt_at", "updated_at"])


def undo_held(change, step: Step) -> tuple[bool, list]:
    """not_undone where a compensation is held with nothing in flight (an undo a release
    removed, compensation.hold_undo_missing): the step it stops at and, for an agent step,
    its calls left compensating. An undo sent and never answered (undo_unanswered), its
    worker dead, is in doubt (HELD_UNANSWERED), not given an error it never met; an agent
    step is in doubt when one of its calls is (its own intent is not an undo sent).
    Returns whether the step changed, and the calls changed."""
    from ...agent_models import ToolCall, ToolCallStatus  # the models module imports ours

    if step.kind == definition.AGENT:
        calls = list(ToolCall.objects.filter(step=step, generation=step.generation,
                                             status=ToolCallStatus.COMPENSATING)
                     .order_by("turn", "index"))
        in_doubt = any(undo_unanswered(call) for call in calls)
    else:
        calls, in_doubt = [], undo_unanswered(step)
    changed_calls = calls_not_undone(change, step, unanswered=HELD_UNANSWERED, calls=calls)
    changed = undo_ended(step, in_doubt=HELD_UNANSWERED if in_doubt else None)
    return changed, changed_calls
