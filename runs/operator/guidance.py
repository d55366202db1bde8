"""The smallest safe next action for a run that needs a person, in words.

Derived from the run's attention reason, the step it concerns (its status, impact and
recovery contract) and the operator actions the transitions accept now (runs.operator.actions), so
the console never recommends what would be refused. Read-only: nothing here changes a run.
"""

from dataclasses import dataclass

from .. import store
from ..agent_models import ToolCall, ToolCallStatus
from ..definitions import definition
from ..definitions.contracts import step_contract
from ..machine.transitions.lookup_verdicts import not_found_trusted_from
from ..machine.transitions.operator_rules import paused_undo
from ..machine.transitions.tool_call_rules import call_refusal, last_turn, tool_of
from ..machine.transitions.unsettled import unknown_calls
from ..models import AttentionReason, ErrorClass, Run, RunStatus, Step, StepStatus, Workflow
from ..permissions import grant_for
from .actions import ACTIONS, OperatorAction


@dataclass(frozen=True)
class Recommendation:
    """What happened, what is known and what is not, and the one next action."""

    happened: str
    known: list[str]
    unknown: list[str]
    action: OperatorAction | None
    step: str
    why: str
    # The attention reason, whose runbook section says more (docs/operations.md).
    reason: str
    # For an action aimed at one tool call of an agent step: the call's slug on the run
    # page (step-turn-index), whose own dialog the recommendation opens.
    call_slug: str = ""
    # The action meant, also when it is refused now (then `action` is None).
    meant: str = ""

    @property
    def reason_label(self) -> str:
        return AttentionReason(self.reason).label

    @property
    def action_name(self) -> str:
        return self.action.name if self.action else ""


@dataclass(frozen=True)
class ActsForNobody:
    """A reader no person is behind (an API token no admin named a person on), named as
    `name` ("API token erp"): it may take no operator action, whatever it holds."""

    name: str


def for_reader(next_step: str, run: Run, action, reader) -> str:
    """`next_step` (advising `action`, an OperatorAction or None) as `reader` reads it:
    where they may not take the action on the run's workflow, it adds that the action needs
    someone who holds its permission (its row of the operator table, the one the console's
    action buttons ask), named with its description, so that advice shared from a person who
    may only look does not read as theirs to act on. A reader that ActsForNobody is told
    that the action needs a person, and which permission that person needs. Unchanged
    otherwise. The investigation card and manage.py show_run --user say it alike."""
    if action is None:
        return next_step
    nobody = isinstance(reader, ActsForNobody)
    if not nobody and grant_for(reader, action.permission).covers(run.workflow_id):
        return next_step
    described = dict(Workflow._meta.permissions).get(action.permission)
    right = f"runs.{action.permission}" + (f" ({described})" if described else "")
    if nobody:
        # Whatever its maker holds: what it changes is done for a person, named on it.
        return (f"{next_step.rstrip('.')}. {reader.name} acts for nobody, so it can take "
                f"no operator action: it takes a person who holds {right} on "
                f"{run.workflow_name} to {action.label.lower()} this run.")
    return (f"{next_step.rstrip('.')}. {reader.get_username()} may not "
            f"{action.label.lower()} this run: it needs someone who holds {right} "
            f"on {run.workflow_name}.")


def _concerned_step(run: Run, steps: list[Step]) -> Step | None:
    by_name = {s.name: s for s in steps}
    for status in (StepStatus.UNKNOWN, StepStatus.COMPENSATION_FAILED, StepStatus.FAILED,
                   StepStatus.WAITING):
        hit = next((s for s in steps if s.status == status), None)
        if hit is not None:
            return hit
    return by_name.get(run.current_step)


def recommend(run: Run, steps: list[Step]) -> Recommendation | None:
    """The recommended next action for a run in attention (or whose compensation failed);
    None for a run that needs nobody."""
    if run.status not in (RunStatus.ATTENTION, RunStatus.COMPENSATION_FAILED):
        return None
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    step = _concerned_step(run, steps)
    reason = run.attention_reason or AttentionReason.UNKNOWN_OUTCOME
    known = [f"{s.name}: done, evidence {s.remote_ref}" for s in steps
             if s.status == StepStatus.SUCCEEDED and s.remote_ref and s.kind in (definition.WRITE,
                                                                                 definition.NOTIFY)]
    unknown: list[str] = []
    happened = run.status_message or run.get_attention_reason_display()
    if step is not None and step.kind == definition.AGENT and step.status == StepStatus.UNKNOWN:
        call = unknown_tool_call(step)
        if call is not None:
            return _reconcile_tool_call(run, step, call, happened, known, reason)
    if reason == AttentionReason.SEALED_VALUE_UNREADABLE and step is not None \
            and step.kind == definition.AGENT and step.status == StepStatus.FAILED:
        call = unreadable_tool_call(step)
        if call is not None:  # else its model turn stopped it: the step is retried
            return _retry_tool_call(run, step, call, happened, known, reason, workflow)
    # The step is the one the recommended action's transition would act on: a run paused
    # before the undo of one step may hold another step that failed, and naming that one
    # would recommend what the transition refuses.
    step = waits_at(run, steps, _action_for(reason, step), step)
    spec = _spec(workflow, step)
    name = step.name if step is not None else ""

    def offer(action: str, why: str, target: str = "") -> Recommendation:
        spec_action = ACTIONS[action]
        target_step = next((s for s in steps if s.name == target), None)
        refused = spec_action.refusal(run, steps, step=target_step)
        return Recommendation(happened=happened, known=known, unknown=unknown,
                              action=None if refused else spec_action,
                              step=target if not refused else "",
                              why=why if not refused else f"{why} (not possible now: {refused})",
                              reason=reason, meant=action)

    if reason == AttentionReason.ENDED_UNSETTLED and step is not None:
        unknown.append(f"whether {name} took effect in the remote system")
        if spec is not None and spec.reconcile_fn is not None \
                and (trusted_from := _not_found_proves_nothing_until(spec, step)) is not None:
            return offer("reconcile", f"Look {name} up by its key again after "
                         f"{trusted_from:%Y-%m-%d %H:%M:%S %Z}: {_not_found_yet(reason)}", name)
        how = ("look it up by its key" if spec is not None and spec.reconcile_fn is not None
               else "check the remote system by hand and record what you found, with "
                    "evidence")
        return offer("reconcile", f"The run was ended while {name}'s outcome was unknown: "
                     f"{how}. Settling it does not send the run on; once every effect is "
                     "settled the run is terminated.", name)
    if _settled_not_done(reason, step):
        return offer("retry_step", f"{name} was settled as not done (its effect was not "
                     "found): retry it to send it again with the same key; if the business "
                     "no longer wants it, compensate or terminate instead.", name)
    if reason == AttentionReason.UNKNOWN_OUTCOME or (
            step is not None and step.status == StepStatus.UNKNOWN):
        unknown.append(f"whether {name} took effect in the remote system")
        # The key goes back before anything reads the value again.
        first = _unknown_needs_sealed_value(name, step) \
            if reason == AttentionReason.SEALED_VALUE_UNREADABLE else ""
        if spec is not None and spec.reconcile_fn is not None:
            if (trusted_from := _not_found_proves_nothing_until(spec, step)) is not None:
                return offer("reconcile", f"{first}Look {name} up by its key again after "
                             f"{trusted_from:%Y-%m-%d %H:%M:%S %Z}: {NOT_FOUND_YET}", name)
            return offer("reconcile", f"{first}Look {name} up by its key now: found settles "
                         "it and the run continues; not found marks it failed, to retry with "
                         "the same key.", name)
        return offer("reconcile", f"{first}{name} has no lookup: check the remote system by "
                     f"hand ({step_contract(spec).evidence if spec else 'its evidence'}) and "
                     "record what you found, with evidence.", name)
    if _undo_needs_sealed_value(reason, step):
        # An undo's code reads the value: it may have sent before (effects.undo_outcome
        # holds it as any failed undo, sent again with its own key).
        return offer("compensate", f"The undo of {name} {NEEDS_SEALED_VALUE}. "
                     f"{PUT_THE_KEY_BACK}, then compensate again: the undo is sent again "
                     "with its own key.")
    if _approval_needs_sealed_value(reason, step):
        return offer("resume", f"No approval request can be made for {name}: its snapshot "
                     f"{_sealed_value_words('resume to ask the approvers')}.")
    if reason == AttentionReason.SEALED_VALUE_UNREADABLE:
        return offer("retry_step", f"{name} {_sealed_value_words('retry it')} with the same "
                     "key.", name)
    if reason == AttentionReason.COMPENSATION_PAUSED:
        paused = paused_undo(run, steps, workflow)  # a step's undo, or one tool call's
        return offer("confirm_compensation", f"Check what the undo of {paused or name} will "
                     "send, then confirm it; the older undos follow.", name)
    if reason == AttentionReason.COMPENSATION_FAILED:
        unknown.append("which effects of the undone steps still stand, beyond the evidence")
        return offer("compensate", f"Fix what made the undo of {name} fail, then compensate "
                     "again: the failed undo is sent again with its own key.")
    if _agent_budget_spent(reason, step):
        return offer("rerun_from_step", f"{name} spent its budget ({happened}). Re-run it "
                     "from this step once the budget or the prompt is changed: the "
                     "conversation starts afresh with new keys, and what its tool calls did "
                     "so far stands (compensate first if it should not).", name)
    if reason == AttentionReason.BUDGET_EXHAUSTED:
        return offer("retry_step", f"{name} ran out of attempts with evidence each time that "
                     "nothing changed. Once the remote system is back, retry it (same key, "
                     "fresh budget).", name)
    if reason == AttentionReason.PERMANENT_ERROR and step is not None \
            and step.kind in (definition.SLEEP, definition.EVENT):
        # No remote system: the wait's own declaration gave a time the database cannot keep
        # (timers.failed_for_its_time), and a retry under the same code fails the same way.
        return offer("retry_step", f"{name} would wait until a time the database cannot keep "
                     "(its error names it): the workflow's declaration of the wait gives it. "
                     "Release code whose duration, until or timeout gives a time before the "
                     "year 9999, then retry it.", name)
    if reason == AttentionReason.PERMANENT_ERROR:
        # Only an end the run offers: a workflow without undos cannot be compensated.
        instead = "compensate" if ACTIONS["compensate"].refusal(run, steps) is None \
            else "terminate the run"
        if step is not None and step.error_class == ErrorClass.KEY_REUSED:
            return offer("reconcile", f"The receiver holds an earlier request under {name}'s "
                         "key, with other arguments, and refused this one. Look up what that "
                         f"first request did: if {name}'s own effect happened, record it by "
                         "hand with evidence (a lookup by the key finds the first request's); "
                         "retry once its arguments match the first request's; if the "
                         f"business no longer wants it, {instead}.", name)
        return offer("retry_step", f"The remote system refused {name}. Fix the cause (data, "
                     "credentials, permission) first, then retry it; if the business no longer "
                     f"wants it, {instead} instead.", name)
    if reason == AttentionReason.MODEL_OUTPUT_PAUSED:
        return offer("retry_step", f"The model's answers for {name} failed their schema; its "
                     "invalid output is kept on the step. Fix the prompt or the model, then "
                     "retry it.", name)
    if reason == AttentionReason.UNCLASSIFIED_ERROR and step is not None \
            and step.kind in (definition.SLEEP, definition.EVENT):
        # Its until() or correlate() failed with the run's input (timers.failed_in_its_code):
        # the code is there, and the input cannot be changed, so only the code can be fixed.
        fn = "until(input)" if step.kind == definition.SLEEP else "correlate(input)"
        return offer("retry_step", f"{name}'s {fn}, the workflow's code, failed with this "
                     "run's input (the message says how); the input cannot be changed. "
                     "Release code that takes it, then retry the step; if the business no "
                     "longer wants the run, terminate it.", name)
    if reason == AttentionReason.UNCLASSIFIED_ERROR:
        return offer("retry_step", f"{name} raised an unexpected error. Read it, fix the "
                     "code or the data, then retry.", name)
    if reason in (AttentionReason.APPROVAL_TIMED_OUT, AttentionReason.APPROVAL_REJECTED):
        who = ", ".join(spec.approval.approvers) if spec is not None and spec.approval else \
            "the approvers"
        if reason == AttentionReason.APPROVAL_REJECTED:
            if ACTIONS["compensate"].refusal(run, steps) is None:
                return offer("compensate", f"{name} was rejected: a business decision. Undo "
                             "what the run did so far.")
            # Nothing to undo: the runbook's answer is to end the run, not a refused button.
            return offer("terminate", f"{name} was rejected: a business decision, and the run "
                         "did nothing that needs undoing. Terminate it with the reason; if "
                         "the rejection was a mistake, resume asks again.")
        return offer("resume", f"Nobody decided {name} in time: chase {who}, then resume to "
                     "wait for their decision again.")
    if reason == AttentionReason.APPROVAL_UNASKABLE:
        return offer("resume", f"No approval request can be made for {name} (the message "
                     "says why: its snapshot fails, or the code no longer has the step): fix "
                     "the code, then resume to ask the approvers again; or terminate.")
    if reason == AttentionReason.EVENT_TIMED_OUT:
        return _event_timed_out(offer, step, spec, name)
    # A run held while it was undoing (compensation failed) goes on undoing, never forward.
    go_on, then = ("compensate", "then compensate to go on undoing") \
        if run.status == RunStatus.COMPENSATION_FAILED else ("resume", "then resume")
    if reason == AttentionReason.WORKERS_KEEP_STOPPING:
        return offer(go_on, f"Workers stopped again and again at {name or 'this run'} "
                     "before recording anything (killed, out of memory, a checkpoint the "
                     f"database refused): read their logs around the take-backs, fix the "
                     f"cause, {then}.")
    if reason == AttentionReason.INPUT_REJECTED:
        return offer(go_on, f"{run.workflow_name} v{run.workflow_version} no longer "
                     "accepts this run's input (the message says where): deploy a version "
                     f"of its schema that accepts it, {then}; or terminate the run.")
    if reason == AttentionReason.DEFINITION_MISSING:
        return offer(go_on, f"This worker's code has no {run.workflow_name} "
                     f"v{run.workflow_version}, or not all of its steps (the message says "
                     f"which): deploy the code that has them, {then}.")
    return offer("resume", "Read the run's history, settle anything unknown, then resume.")


def _event_timed_out(offer, step: Step | None, spec: definition.StepDef | None,
                     name: str) -> Recommendation:
    """The event wait's timeout policy decides what the run accepts: "escalate" leaves the
    step waiting (an event may still be delivered or skipped), "fail" fails it (a resume
    waits again, with a new deadline). A resume after "escalate" waits with no deadline."""
    event = getattr(spec, "event_name", "") or "awaited"
    if step is not None and step.status == StepStatus.WAITING:
        return offer("event_received", f"No {event} event came for {name} by its deadline; "
                     "the step still waits and a late event is still delivered. Ask the "
                     "other system whether it sent it: if it confirms the event by other "
                     "means, deliver it with its payload; to go on without it, skip the "
                     "event.")
    return offer("resume", f"No {event} event came for {name} by its deadline and its "
                 "policy failed the step: ask the other system whether it sent it, then "
                 "resume to wait for it again with a new deadline (the event can then be "
                 "delivered or skipped by hand); or compensate or terminate.")


def _spec(workflow: definition.Workflow | None, step: Step | None) -> definition.StepDef | None:
    return definition.step_of(workflow, step.name) if step is not None else None


NOT_FOUND_YET = ("it was not found, but its receiver ignores keys and a request still in "
                 "flight could land until then; a retry before then could do it twice.")
# A run a person ended offers no retry (operator.reconcile: settling never sends it on); a
# person's own finding, with evidence, is recorded as they give it, lookup delay or not.
ENDED_NOT_FOUND_YET = ("it was not found, but its receiver ignores keys and a request still in "
                       "flight could land until then. The run was ended, so it is not sent "
                       "again: look it up then, or record by hand what the remote system "
                       "shows, with evidence; once every effect is settled the run is "
                       "terminated.")


def _not_found_yet(reason: str) -> str:
    return ENDED_NOT_FOUND_YET if reason == AttentionReason.ENDED_UNSETTLED else NOT_FOUND_YET


def _not_found_proves_nothing_until(spec, row):
    """Until when a lookup's "not found" for `row` (an unknown step's or tool call's, whose
    lookup said so already) proves nothing, by the machine's one rule; None when it may be
    trusted now."""
    if spec is None or row.status != StepStatus.UNKNOWN or row.next_attempt_at is None:
        return None
    # By the database's clock, as the transition that records the next lookup judges it.
    return not_found_trusted_from(spec, row, store.current().now())


def _agent_budget_spent(reason: str, step: Step | None) -> bool:
    """Whether the run stopped because agent `step` spent its budget. Its turns, calls and
    tokens are counted in its generation: a retry keeps that generation and would stop
    again at once, so a re-run from the step is what helps."""
    return reason == AttentionReason.BUDGET_EXHAUSTED and step is not None \
        and step.kind == definition.AGENT


# What a step, a tool call or an undo held for a sealed value it could not open
# (AttentionReason.SEALED_VALUE_UNREADABLE) needs, and the cure. Its error names the key
# (sensitive.decrypt).
NEEDS_SEALED_VALUE = ("needs a value sealed with a field key that this installation's "
                      "FIELD_ENCRYPTION_KEYS does not hold, or holds with another secret (its "
                      "error names the key)")
PUT_THE_KEY_BACK = ("Put that key back in FIELD_ENCRYPTION_KEYS on every worker and the "
                    "console (after the current key; `manage.py reseal_fields` seals stored "
                    "values again under the current key, so that an old key can go)")


def _sealed_value_words(then: str) -> str:
    """The words for an effect held for a sealed value before anything was sent, ending
    with what to do once the key is back (`then`)."""
    return f"{NEEDS_SEALED_VALUE}: nothing was sent. {PUT_THE_KEY_BACK}, then {then}"


def _unknown_needs_sealed_value(what: str, row) -> str:
    """The words for an unknown effect (a step's or a tool call's row) held for a sealed
    value, before what to do once the key is back: its code could not open it and may have
    sent before it read (effects.fail); or its lookup by key cannot open what it is asked
    with, and whether it took effect is still unknown (effects.settle)."""
    if row.error_class == ErrorClass.UNREADABLE:
        return (f"{what} {NEEDS_SEALED_VALUE}, and its code ran: it may have sent before it "
                f"read the value. {PUT_THE_KEY_BACK}. Then: ")
    return (f"The lookup of {what} by its key {NEEDS_SEALED_VALUE}: whether it took effect is "
            "still unknown, and it is not looked up again before the key is back. "
            f"{PUT_THE_KEY_BACK}. Then: ")


def _undo_needs_sealed_value(reason: str, step: Step | None) -> bool:
    """Whether the run stopped undoing because an undo could not open a sealed value
    (effects.undo_outcome): it goes on undoing, never forward."""
    return reason == AttentionReason.SEALED_VALUE_UNREADABLE and step is not None \
        and step.status == StepStatus.COMPENSATION_FAILED


def _approval_needs_sealed_value(reason: str, step: Step | None) -> bool:
    """Whether the run was held because its approval's snapshot could not open a sealed
    value (approval_waits.approval_unaskable): the step still waits, and a resume asks."""
    return reason == AttentionReason.SEALED_VALUE_UNREADABLE and step is not None \
        and step.status == StepStatus.WAITING


def _settled_not_done(reason: str, step: Step | None) -> bool:
    """Whether the unknown outcome that stopped the run was settled as not done (reconciled
    "not found"): its step failed, and what follows is a retry, not another lookup."""
    return reason == AttentionReason.SETTLED_NOT_DONE and step is not None \
        and step.status == StepStatus.FAILED


def _action_for(reason: str, step: Step | None) -> str:
    """The action recommend() offers for `reason` (the branches below, in one table)."""
    if _settled_not_done(reason, step):
        return "retry_step"
    if reason == AttentionReason.UNKNOWN_OUTCOME or (
            step is not None and step.status == StepStatus.UNKNOWN):
        return "reconcile"
    if _agent_budget_spent(reason, step):
        return "rerun_from_step"
    if _undo_needs_sealed_value(reason, step):
        return "compensate"
    if _approval_needs_sealed_value(reason, step):
        return "resume"
    return {
        AttentionReason.COMPENSATION_PAUSED: "confirm_compensation",
        AttentionReason.COMPENSATION_FAILED: "compensate",
        AttentionReason.BUDGET_EXHAUSTED: "retry_step",
        AttentionReason.PERMANENT_ERROR: "retry_step",
        AttentionReason.MODEL_OUTPUT_PAUSED: "retry_step",
        AttentionReason.UNCLASSIFIED_ERROR: "retry_step",
        AttentionReason.SEALED_VALUE_UNREADABLE: "retry_step",
        AttentionReason.APPROVAL_REJECTED: "compensate",
    }.get(reason, "resume")


def waits_at(run: Run, steps: list[Step], action: str, step: Step | None) -> Step | None:
    """The step `action` would act on: `step` when the transition accepts it there, else
    the first step it accepts (for an action that takes no step, `step` as it is)."""
    spec = ACTIONS[action]
    if not spec.takes_step:
        return step
    eligible = spec.eligible_steps(run, steps)
    if step is not None and any(s.name == step.name for s in eligible):
        return step
    return eligible[0] if eligible else step


def unknown_tool_call(step: Step) -> ToolCall | None:
    """The agent step's tool call to settle next (one query): the first whose unknown
    outcome holds the run's end (unsettled_calls, the rule the end goes by), never one of a
    generation a re-run replaced. Only where none does, an unknown read: a run reopened
    after it was ended with a read in flight whose result never came, its step unknown for
    that read alone."""
    return next(iter(unknown_calls([step])), None)


def unreadable_tool_call(step: Step) -> ToolCall | None:
    """The agent step's newest tool call that failed on a sealed value it could not open
    (ErrorClass.UNREADABLE), in its generation (one query)."""
    return (ToolCall.objects.filter(step=step, generation=step.generation,
                                    status=ToolCallStatus.FAILED,
                                    error_class=ErrorClass.UNREADABLE)
            .order_by("-turn", "-index").first())


def _retry_tool_call(run: Run, step: Step, call: ToolCall, happened: str, known: list[str],
                     reason: str, workflow: definition.Workflow | None) -> Recommendation:
    """Send the call that could not open a sealed value again with its own key, once the
    key is back: asking the model again would not make it."""
    action = ACTIONS["retry_tool_call"]
    where = f"tool call {call.ref} ({call.tool}) of {step.name}"
    refused = call_refusal(action.name, run, step, call, tool_of(workflow, step, call),
                           last_turn=last_turn(step))
    why = (f"The {where} {_sealed_value_words('retry the call')} with its own key "
           f"{call.idempotency_key} (where its tool asks for approval of its arguments, it "
           "is asked again first).")
    return _call_offer(action, step, call, refused, why, happened=happened, known=known,
                       unknown=[], reason=reason)


def _call_offer(action: OperatorAction, step: Step, call: ToolCall, refused: str | None,
                why: str, **seen) -> Recommendation:
    """The next step aimed at one tool call (its own dialog on the page): `action`, or, when
    `refused` says why it is not possible now, the same words and no action."""
    return Recommendation(
        **seen, action=None if refused else action, step=step.name if not refused else "",
        why=why if not refused else f"{why} (not possible now: {refused})",
        call_slug="" if refused else f"{step.name}-{call.turn}-{call.index}",
        meant=action.name)


def _reconcile_tool_call(run: Run, step: Step, call: ToolCall, happened: str,
                         known: list[str], reason: str) -> Recommendation:
    action = ACTIONS["reconcile_tool_call"]
    where = f"tool call {call.ref} ({call.tool}) of {step.name}"
    # The rule is the transition's; the tool's declaration only changes the wording.
    refused = call_refusal(action.name, run, step, call, None, last_turn=call.turn)
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    spec = _spec(workflow, step)
    tool = spec.tools.get(call.tool) if isinstance(spec, definition.AgentSpec) else None
    if (trusted_from := _not_found_proves_nothing_until(tool, call)) is not None:
        why = (f"Look {where} up by its key {call.idempotency_key} again after "
               f"{trusted_from:%Y-%m-%d %H:%M:%S %Z}: {_not_found_yet(reason)}")
    elif reason == AttentionReason.ENDED_UNSETTLED:
        # As the transition does for a run a person ended (agent_operator.reconcile_tool_call).
        why = (f"The run was ended while the outcome of {where} was unknown: look it up by "
               f"its key {call.idempotency_key}. Settling it records what the call did (found: "
               "done; not found: not done) and does not send the agent on; once every effect "
               "is settled the run is terminated.")
    else:
        why = (f"Look {where} up by its key {call.idempotency_key} now: found settles it and "
               "the agent goes on; not found marks it failed and the model is told so.")
    if reason == AttentionReason.SEALED_VALUE_UNREADABLE:
        why = f"{_unknown_needs_sealed_value(where, call)}{why}"
    return _call_offer(action, step, call, refused, why, happened=happened, known=known,
                       unknown=[f"whether {where} took effect in the remote system"],
                       reason=reason)
