"""The operator actions, defined once: the console, its bulk actions, the API and the CLI
read this table.

Each action names its transition (in runs.machine.transitions, the same function automation
calls), the permission it needs on the run's workflow, and the sentence that says what it
will do; its label is the transitions' (transitions.LABELS), which their refusals name.
Which runs and steps it applies to, whether it needs a second person, and that it needs a
reason are decided by the transitions (transitions.refusal, needs_second_person, and every
operator transition refusing an empty reason), so what a caller offers is what the
transition accepts, and no caller can skip a rule.
"""

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass

from audit.chain import Actor
from audit.redaction import redact_text

from ..agents.tool_call_undo import undo_tool_call
from ..definitions import definition
from ..machine import sensitive, tracing, transitions
from ..machine.transitions.operator_rules import check_before_work
from ..models import Run, Step, StepStatus
from ..waiting import events, payloads
from .action_input import (
    ActionInputError,
    call_refused,
    field_refused,
    remote_ref_refused,
    target_missing,
)
from .previews import compensation_outline, compensation_preview, tool_call_outline
from .reconciliation import reconcile_step, reconcile_tool_call_by_key


@dataclass(frozen=True)
class ActionInput:
    """What a person asked for: the action's input, as any caller collects it. Raises
    ActionInputError for a field's text no door takes (field_refused) and for a tool call
    not written as one's id or given without its step (action_input.call_refused), in one
    set of words."""

    reason: str
    step: str = ""
    # reconcile: "ask" (look it up by key now), "found" or "not_found" (recorded by hand)
    mode: str = "ask"
    remote_ref: str = ""
    evidence: str = ""
    # The tool call ("turn.index") of the step, for the actions aimed at one tool call.
    call: str = ""

    def __post_init__(self):
        # The blanks around what was typed are no part of it, at any door: the console's
        # form, the API's body or a command line's option give the same record, and the
        # same answer (a payload of spaces is none, a reason ending in a form feed ends).
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, getattr(self, f.name).strip())
            if (refused := field_refused(f.name, getattr(self, f.name))) is not None:
                raise refused
        if (refused := call_refused(self.step, self.call)) is not None:
            raise refused
        # Kept in the audit chain, the run's message, a four-eyes request: no credential.
        object.__setattr__(self, "reason", redact_text(self.reason))

    @classmethod
    def from_form(cls, data) -> "ActionInput":
        """The input from a posted form (or any mapping of strings); see field_refused."""
        given = {f.name: (data.get(f.name) or "").strip() for f in dataclasses.fields(cls)}
        return cls(**{**given, "mode": given["mode"] or "ask"})


@dataclass(frozen=True)
class OperatorAction:
    name: str
    # The codename of the runs.Workflow permission (global or per workflow) it needs.
    permission: str
    summary: str
    call: Callable[..., Run]
    danger: bool = False

    @property
    def label(self) -> str:
        return transitions.LABELS[self.name]  # the one table: refusals name it as buttons do

    @property
    def takes_step(self) -> bool:
        return self.name in transitions.STEP_ACTIONS

    @property
    def takes_call(self) -> bool:
        return self.name in transitions.TOOL_CALL_ACTIONS

    @property
    def names_call(self) -> bool:
        """Whether the action may be aimed at one tool call (it must be, if takes_call)."""
        return self.takes_call or self.name in transitions.CALL_OPTIONAL_ACTIONS

    def reads(self, mode: str = "ask") -> frozenset[str]:
        """The fields of ActionInput this action reads (a reconcile: in `mode`), so that a
        caller can refuse the others it was given instead of dropping them unseen."""
        fields = {"reason", *(["step"] if self.takes_step else []),
                  *(["call"] if self.names_call else [])}
        if self.name in _RECONCILE:
            # Asked by key, the lookup's answer is the evidence and names the reference.
            fields |= {"mode", *(["evidence"] if mode != "ask" else []),
                       *(["remote_ref"] if mode == "found" else [])}
        if self.name == "event_received":
            fields.add("evidence")  # the event's payload
        return frozenset(fields)

    def transition_first(self, given: ActionInput) -> bool:
        """Whether the action's first work is its transition, so a caller may lock the run
        with its own checks and hold the lock into the transition. Not for the actions that
        first ask or undo something in another system (never done under a lock) or read
        and check the run's input on their own (the event's payload, the undo's preview)."""
        if self.name in _RECONCILE:
            return given.mode != "ask"
        return self.name not in _WORK_BEFORE_TRANSITION

    @property
    def may_need_second_person(self) -> bool:
        return self.name in transitions.SECOND_PERSON_ACTIONS

    def refusal(self, run: Run, steps: list[Step], step: Step | None = None) -> str | None:
        """Why this action cannot succeed on `run` now, or None: the transition's own rule."""
        return transitions.refusal(self.name, run, steps, _definition(run), step=step)

    def eligible_steps(self, run: Run, steps: list[Step]) -> list[Step]:
        return transitions.eligible_steps(self.name, run, steps, _definition(run))

    def needs_second_person(self, steps: list[Step]) -> bool:
        return transitions.needs_second_person(self.name, steps)

    def explain(self, run: Run, steps: list[Step], call: dict | None = None,
                asking: bool = True, step: str = "") -> list[str]:
        """What pressing the button will do, in words: for its confirmation dialog, or (not
        `asking`) for the second person's page, of the `step` asked for; aimed at one tool
        call, what it does to it."""
        details = (tool_call_outline(self.name, call) if call is not None
                   else _rerun_details(run, steps, step) if self.name == "rerun_from_step"
                   else _DETAILS.get(self.name, _no_details)(run, steps))
        lines = [self.summary, *details]
        # A re-run counts only the effects from the chosen step on: its details say so.
        if asking and self.name != "rerun_from_step" and self.needs_second_person(steps):
            lines.append("This run has a high-impact effect that took place: your request goes to "
                         "a second person for approval (four eyes) and nothing happens until then.")
        return lines

    def perform(self, run_id: int, *, actor: Actor, given: ActionInput,
                approved_by: Actor | None = None) -> Run:
        """Call the transition with a person's input. Raises ActionInputError for missing
        input and TransitionNotAllowed where the run does not allow it (nothing changes)."""
        if (self.takes_step and not given.step) or (self.takes_call and not given.call):
            run = Run.objects.get(pk=run_id)
            raise target_missing(self, run, list(run.steps.order_by("position")), given)
        run = self.call(run_id, actor=actor, given=given, approved_by=approved_by)
        tracing.event(f"operator {self.name}", run, attributes={
            "operator.action": self.name, "operator.actor": actor.label,
            "operator.reason": given.reason[:500], "step.name": given.step,
            "operator.second_person": approved_by.label if approved_by else ""})
        return run


# The actions that settle an effect: asked by key ("ask" mode) or recorded by hand.
_RECONCILE = ("reconcile", "reconcile_tool_call")
# The actions whose call does work of its own before their transition (see the adapters).
_WORK_BEFORE_TRANSITION = frozenset({"event_received", "confirm_compensation",
                                     "compensate_tool_call"})


def _definition(run: Run) -> definition.Workflow | None:
    return definition.registry.get(run.workflow_name, run.workflow_version)


# --- what each action does with a person's input -------------------------------------------

def _resume(run_id, *, actor, given, approved_by):
    return transitions.resume(run_id, actor=actor, reason=given.reason)


def _deliver_event(run_id, *, actor, given, approved_by):
    run = Run.objects.get(pk=run_id)
    step = transitions.waiting_event_step(list(run.steps.all()))
    payload = {}
    # The payload is checked only where the transition could accept it: otherwise its own
    # refusal (no reason, not waiting for an event, a step a release renamed) is the answer.
    spec = definition.step_of(_definition(run), step.name) if step is not None else None
    if spec is not None and given.reason.strip():
        try:
            # The door's checks (depth, size, storable, schema), then the run's own version's
            # schema on what the person gave, as on delivery (payloads.for_run): the newest
            # version's reading, its defaults filled in, is no payload an older run takes.
            sent = events.payload_from_json(given.evidence or "{}")
            payloads.validated(run.workflow_name, spec.event_name, sent)
            payload = payloads.for_run(step, spec.event_name, sent)
        except payloads.EventRefused as exc:
            # Worded for the person, not for a sender at the door: nothing of theirs is
            # kept, and the run got nothing. The caller names the action already.
            raise ActionInputError(payloads.refusal(exc, by_hand=True), "evidence") from None
    return transitions.deliver_event_by_hand(run_id, payload=payload, actor=actor,
                                             reason=given.reason)


def _skip_event(run_id, *, actor, given, approved_by):
    return transitions.skip_event(run_id, actor=actor, reason=given.reason)


def _wake_timer(run_id, *, actor, given, approved_by):
    return transitions.wake_timer(run_id, actor=actor, reason=given.reason)


def _hand_verdict(given: ActionInput):
    """The outcome a person records by hand (reconcile of a step or of one tool call): found,
    naming the effect's remote reference, or not found. The transition itself refuses it
    without evidence (kernel._require_evidence)."""
    if given.mode not in ("found", "not_found"):
        raise ActionInputError(f"Unknown reconcile mode {given.mode!r}.")
    if given.mode == "found" and (refused := remote_ref_refused(given.remote_ref)) is not None:
        raise refused
    return (definition.Found(given.remote_ref.strip()) if given.mode == "found"
            else definition.NotFound())


def _reconcile(run_id, *, actor, given, approved_by):
    if given.mode == "ask":
        return reconcile_step(run_id, step_name=given.step, actor=actor,
                              reason=given.reason)
    return transitions.reconcile(run_id, step_name=given.step, verdict=_hand_verdict(given),
                                 actor=actor, reason=given.reason,
                                 evidence=given.evidence.strip())


def _retry_step(run_id, *, actor, given, approved_by):
    return transitions.retry_step(run_id, step_name=given.step, actor=actor,
                                  reason=given.reason)


def _ask_again(run_id, *, actor, given, approved_by):
    return transitions.ask_again(run_id, step_name=given.step, actor=actor,
                                 reason=given.reason)


def _compensate(run_id, *, actor, given, approved_by):
    return transitions.compensate(run_id, actor=actor, reason=given.reason,
                                  approved_by=approved_by)


def _confirm_compensation(run_id, *, actor, given, approved_by):
    # The preview runs the workflow's own code: only for the undo the run is paused at.
    run = check_before_work("confirm_compensation", run_id, reason=given.reason,
                            step_name=given.step, call_ref=given.call).run
    preview = compensation_preview(run, given.step)
    return transitions.confirm_compensation(
        run_id, step_name=given.step, call_ref=given.call, actor=actor, reason=given.reason,
        data={"will_send": preview} if preview is not None else None)


def _cancel(run_id, *, actor, given, approved_by):
    return transitions.cancel(run_id, actor=actor, reason=given.reason,
                              approved_by=approved_by)


def _terminate(run_id, *, actor, given, approved_by):
    return transitions.terminate(run_id, actor=actor, reason=given.reason,
                                 approved_by=approved_by)


def _reconcile_tool_call(run_id, *, actor, given, approved_by):
    if given.mode == "ask":
        return reconcile_tool_call_by_key(run_id, step_name=given.step, call_ref=given.call,
                                          actor=actor, reason=given.reason)
    return transitions.reconcile_tool_call(
        run_id, step_name=given.step, call_ref=given.call, verdict=_hand_verdict(given),
        actor=actor, reason=given.reason, evidence=given.evidence.strip())


def _retry_tool_call(run_id, *, actor, given, approved_by):
    return transitions.retry_tool_call(run_id, step_name=given.step, call_ref=given.call,
                                       actor=actor, reason=given.reason)


def _cancel_tool_call(run_id, *, actor, given, approved_by):
    return transitions.cancel_tool_call(run_id, step_name=given.step, call_ref=given.call,
                                        actor=actor, reason=given.reason)


def _compensate_tool_call(run_id, *, actor, given, approved_by):
    call = undo_tool_call(run_id, step_name=given.step, call_ref=given.call, actor=actor,
                          reason=given.reason)
    if call.status != "compensated":
        raise ActionInputError(f"the undo of tool call {call.ref} ({call.tool}) failed: "
                               f"{call.error_message}. It is recorded; ask again to send "
                               "the undo again with the same key.")
    return Run.objects.get(pk=run_id)


def _reopen(run_id, *, actor, given, approved_by):
    return transitions.reopen(run_id, actor=actor, reason=given.reason)


def _rerun_from_step(run_id, *, actor, given, approved_by):
    return transitions.rerun_from_step(run_id, step_name=given.step, actor=actor,
                                       reason=given.reason, approved_by=approved_by)


ACTIONS: dict[str, OperatorAction] = {a.name: a for a in [
    OperatorAction(
        "resume", "resume_run",
        "The run continues from its last checkpoint. A failed or scheduled step is tried "
        "again with a fresh retry budget and the same idempotency key (a step with the stop "
        "verdict waits for a second person's approval of that attempt first); a step whose "
        "outcome is unknown is looked up by key first, never blindly resent.", _resume),
    OperatorAction(
        "reconcile", "reconcile_run",
        "Settles a step whose outcome is unknown (or failed): either ask the remote system "
        "by the step's key, or record what you established yourself, with evidence. Found: "
        "the step succeeds and the run continues. Not found: the step is marked failed and "
        "waits for an explicit retry. A run a person ended while the outcome was unknown "
        "never continues: once its last such effect is settled, it is terminated.",
        _reconcile),
    OperatorAction(
        "retry_step", "retry_step",
        "Sends the chosen failed or scheduled step again with the same idempotency key and "
        "a fresh retry budget (a step with the stop verdict waits for a second person's "
        "approval of that attempt first). A step whose outcome is unknown must be "
        "reconciled first.",
        _retry_step),
    OperatorAction(
        "ask_again", "retry_step",
        "Discards the stored model decision of the chosen step and asks the model again (a "
        "new decision version); the later reads and decisions that ran on the old one run "
        "again after it, and a later approval granted on it is asked again. The old decision "
        "is kept in the audit record. Refused once a later step has acted on the old "
        "decision.", _ask_again),
    OperatorAction(
        "compensate", "compensate_run",
        "Undoes the completed steps, newest first, each with its own idempotency key. The "
        "undo of a high-impact step pauses until a person confirms what it will send.",
        _compensate, danger=True),
    OperatorAction(
        "confirm_compensation", "compensate_run",
        "Sends the prepared undo of the high-impact step, or agent tool call, the "
        "compensation paused at (with its own compensation key), then carries on with the "
        "older undos.", _confirm_compensation, danger=True),
    OperatorAction(
        "cancel", "terminate_run",
        "Stops the run at the next step boundary: at once if no step is in flight, "
        "otherwise after the current step's outcome is recorded.", _cancel),
    OperatorAction(
        "terminate", "terminate_run",
        "Ends the run now. A step still in flight is marked unknown and its result is "
        "recorded when it arrives. It never goes on by itself: only Reopen (back to "
        "attention) or Re-run from step (a new generation) brings it back.",
        _terminate, danger=True),
    OperatorAction(
        "event_received", "reconcile_run",
        "Delivers the event the run waits for, as the other system should have sent it: "
        "the payload (JSON, in the evidence field) is checked against the step's schema and "
        "becomes its result; the run goes on. Events kept for this wait (under its name or "
        "a renamed one, with its key, not past their keep time) are marked consumed by this "
        "delivery and never delivered later.", _deliver_event),
    OperatorAction(
        "skip_event", "resume_run",
        "Ends the wait without the event: the step is skipped and the run goes on with its "
        "next step. Events kept for this wait (under its name or a renamed one, with its "
        "key, not past their keep time) are marked consumed by this skip and never "
        "delivered later.", _skip_event),
    OperatorAction(
        "wake_timer", "resume_run",
        "Ends the timer the run sleeps on now, before its time: the run goes on with its "
        "next step at once.", _wake_timer),
    OperatorAction(
        "reopen", "resume_run",
        "Brings the terminated run back to attention, from where it can be resumed, "
        "reconciled or compensated. An event that came while it was terminated is not "
        "delivered to it (the timeline shows it as refused): deliver it by hand if it is "
        "still right.", _reopen),
    OperatorAction(
        "rerun_from_step", "retry_step",
        "Sends the chosen step and every later step again as a new attempt generation, "
        "with new idempotency keys (a receiver that honours keys acts anew); the earlier "
        "steps' results are reused. What the earlier generation did stays in the audit "
        "record; an effect that stands is not undone by this.", _rerun_from_step,
        danger=True),
    # Aimed at one tool call of an agent step (the run page offers them on the call).
    OperatorAction(
        "reconcile_tool_call", "reconcile_run",
        "Settles one tool call whose outcome is unknown: ask the remote system by the "
        "call's key, or record what you established yourself, with evidence. Found: the "
        "call succeeded and the agent goes on. Not found: the call is marked failed and the "
        "model is told it did not happen. A run a person ended while the outcome was unknown "
        "never goes on: once its last such effect is settled, it is terminated.",
        _reconcile_tool_call),
    OperatorAction(
        "retry_tool_call", "retry_step",
        "Sends the failed tool call again with the same idempotency key (after a person's "
        "approval of its arguments where its tool asks for one). Refused once the model "
        "has answered after the failure.", _retry_tool_call),
    OperatorAction(
        "compensate_tool_call", "compensate_run",
        "Undoes this one tool call now with its own compensation key; the run stays with "
        "you. A high-impact call is undone only through the run's Compensate (four eyes).",
        _compensate_tool_call, danger=True),
    OperatorAction(
        "cancel_tool_call", "terminate_run",
        "Cancels this one tool call before it runs (pending, scheduled, or waiting for "
        "approval of its arguments): it never runs, and the model is told in its next turn "
        "that a person cancelled it. A run that waited only for this call goes on; one in "
        "attention stays with you. Its approval request is withdrawn.", _cancel_tool_call,
        danger=True),
]}


def offered(run: Run, steps: list[Step]) -> list[OperatorAction]:
    """The actions that can succeed on `run` now, in the table's order (before checking
    who may use them)."""
    return [a for a in ACTIONS.values() if a.refusal(run, steps) is None]


# --- the details an explanation adds for this run -------------------------------------------

def _no_details(run: Run, steps: list[Step]) -> list[str]:
    return []


def _confirmation_details(run: Run, steps: list[Step]) -> list[str]:
    workflow = _definition(run)
    paused = transitions.paused_undo(run, steps, workflow)
    if paused is None:
        return []
    call = paused.call
    if call is not None:
        tool = workflow.step(paused.step.name).tools.get(call.tool)
        return [f"The undo of {paused} is sent with its compensation key "
                f"{call.compensation_key}. It undoes the call with remote reference "
                f"{call.remote_ref or '-'} and arguments "
                f"{json.dumps(sensitive.shown(tool, call.arguments), default=str)}."]
    preview = compensation_preview(run, paused.step.name)
    if preview is None:
        return [f"The undo of {paused} ({paused.step.remote_ref or 'no reference'}) declares "
                "no preview of what it sends."]
    return [f"The undo of {paused} will send:",
            *(f"{field}: {value}" for field, value in preview.items())]


def _ending_details(run: Run, steps: list[Step]) -> list[str]:
    """Before anyone confirms ending the run: the effects whose outcome is unknown (or in
    flight, which become unknown), which keep the run in attention until settled."""
    unsettled = [str(e) for e in transitions.unsettled_effects(steps)]
    unsettled += [f"{s.name}: in flight: its outcome will be unknown" for s in steps
                  if s.status == StepStatus.RUNNING and s.kind in transitions.EFFECT_KINDS]
    if not unsettled:
        return []
    return ["Effects not settled (they may have happened):", *unsettled,
            "The run stays in attention until each is settled (reconcile), then it is "
            "terminated."]


def _rerun_details(run: Run, steps: list[Step], chosen: str = "") -> list[str]:
    """The effects that already stand from the `chosen` step (one asked for), or else from
    each step a re-run could start at, with their state, and the compensation the workflow
    declares for them, offered first."""
    lines = []
    workflow = _definition(run)
    eligible = transitions.eligible_steps("rerun_from_step", run, steps, workflow)
    first = next((s for s in eligible if s.name == chosen), eligible[0] if eligible else None)
    standing = transitions.standing_effects(steps, first) if first is not None else []
    if standing:
        lines.append(f"Effects that already stand (from {first.name} on; "
                     + ("the step asked for" if first.name == chosen else
                        "a later chosen step leaves out the earlier ones")
                     + ") and would be sent again with a new key:")
        lines += [str(e) for e in standing]
        names = {e.step for e in standing}
        undoable = [s.name for s in steps if s.name in names
                    and getattr(definition.step_of(workflow, s.name), "compensate_fn", None)]
        if undoable:
            why_not = transitions.refusal("compensate", run, steps, workflow)
            lines.append(f"The workflow declares a compensation for {', '.join(undoable)}: "
                         + ("compensate first (the Compensate action) to undo what stands, "
                            "then re-run, so nothing is done twice." if why_not is None else
                            f"Compensate is not offered now ({why_not}); the re-run leaves "
                            "what stands in place."))
        if transitions.high_impact_effects(transitions.rerun_range(steps, first)):
            lines.append("A high-impact effect stands from that step on: a second person "
                         "must approve the re-run (four eyes).")
    elif first is not None:
        lines.append(f"No write or notification stands from {first.name} on.")
    return lines


# Compensating: by the rules the compensation follows (previews.compensation_outline).
_DETAILS = {"compensate": compensation_outline,
            "confirm_compensation": _confirmation_details,
            "terminate": _ending_details, "cancel": _ending_details}
