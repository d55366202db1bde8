"""Where an effect's rows live: the adapters through which the effect machine
(runs.machine.transitions.effects) sees a step's own effect or one tool call of an agent step. Both
rows have the same field names (status, attempt, lookup_failures, remote_ref, result,
error_class, error_message, next_attempt_at, started_at, finished_at); an adapter adds the
effect's spec (the StepDef or the ToolSpec: impact, retry policy, lookup), the step that
holds it, and how it is saved, budgeted, scheduled and stopped; and, for the wait for a
person before an attempt (effects.held_for_approval, effects.decided_by_person), whether it
needs one, how an approval is recorded and spent, what the request shows and what a
decision leaves. `context` is what the transition works under: a Lease, or an operator
transition's operation (each has the run's definition and steps), or None where no spec is
read."""

from functools import cached_property

from audit.actions import AuditAction
from audit.redaction import redact

from ...agent_models import ToolCall, ToolCallStatus
from ...definitions import definition
from ...definitions.contracts import effect_verdict
from ...models import ErrorClass, Step, StepStatus
from .. import sensitive
from ..intentions import intended_action
from ..rule_answers import call_asks_a_person
from . import stop_gate
from .attempts import intent_of
from .kernel import DONE_STEP_STATUSES, Change, reset_budget, restart_retry_budget
from .repeats import earlier_call_may_land, repeat_warning
from .wait_rows import wait_began

# Step and tool-call states share their names (StepStatus, ToolCallStatus): one set serves.
PENDING, RUNNING, SCHEDULED = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.SCHEDULED
SUCCEEDED, FAILED, UNKNOWN = StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.UNKNOWN


class EffectRow:
    """What both kinds of effect do the same way: their intent, and their undo's intent,
    success and failure (on the row's own compensation key, attempt and reference)."""

    def begun(self, change: Change) -> None:
        """The intent checkpoint, in the row itself (no record of its own): the effect
        running, its attempt counted and started, committed before the effect is called. The
        one record that ends the attempt carries it (runs.machine.transitions.attempts)."""
        row = self.row
        row.status = RUNNING
        row.attempt += 1
        row.started_at = row.started_at or change.now
        row.attempt_started_at = change.now
        row.next_attempt_at = None
        self.save(change)

    def undo_begun(self, change: Change, action: str | None = None, *, reason: str = "",
                   **data) -> None:
        """The intent of the effect's undo, in the row: compensating, its attempt counted and
        started. `action`: a record of its own as well (a person's undo of one tool call
        records who asked and why)."""
        row = self.row
        before = row.status
        row.status = StepStatus.COMPENSATING
        row.compensation_attempt += 1
        row.attempt_started_at = change.now
        # Unanswered until its outcome comes (in_flight.undo_unanswered): a time it was due
        # at after a failed try is no answer to this one.
        row.next_attempt_at = None
        self.save(change)
        if action is not None:
            change.audit(action, step=self.step, reason=reason,
                         before={self.status_key: before}, after={self.status_key: row.status},
                         data=self.data(**data, attempt=row.compensation_attempt,
                                        key=row.compensation_key))

    def undone(self, change: Change, remote_ref: str, action: str, /, **data) -> None:
        """The effect's undo succeeded: compensated, with the undo's remote reference, and
        no error (one an earlier try of the undo left no longer says what stands)."""
        row = self.row
        before = row.status
        row.status = StepStatus.COMPENSATED
        row.error_class, row.error_message = "", ""
        row.compensation_ref = str(remote_ref or "")[:300]
        self.save(change)
        change.audit(action, step=self.step, before={self.status_key: before},
                     after={self.status_key: row.status,
                            "compensation_ref": row.compensation_ref},
                     data=self.data(**data) or None)

    def undo_failed(self, change: Change, error: str, error_class: str,
                    action: str | None = None, **data) -> None:
        """The effect's undo failed: the effect still stands (compensation failed), the row
        says with what error (bounded; a record keeps it whole). `action`: a record of its
        own, the row's state before and after (a person's undo of one tool call); without
        it the caller writes the record (effects.undo_outcome)."""
        row = self.row
        before = row.status
        row.status = StepStatus.COMPENSATION_FAILED
        # A class of the step code's own (a StepError subclass's) is unclassified, as a
        # forward step's is (effects.fail): the column holds only the classes there are.
        row.error_class = error_class if error_class in ErrorClass.values \
            else ErrorClass.UNCLASSIFIED
        row.error_message = error[:2000]
        self.save(change)
        if action is not None:
            change.audit(action, step=self.step, before={self.status_key: before},
                         after={self.status_key: row.status},
                         data=self.data(**data, error=error))


class StepEffect(EffectRow):
    """A step's own effect (or, `undo`, its compensation): the row is the Step itself."""

    status_key = "step_status"

    def __init__(self, context, step: Step, *, undo: bool = False,
                 spec: definition.StepDef | None = None):
        self.context, self.row, self.step, self.undo = context, step, step, undo
        self.name = step.name
        if spec is not None:  # the caller's, found already
            self.spec = spec

    @cached_property
    def spec(self) -> definition.StepDef:
        return self.context.definition.step(self.step.name)

    @property
    def format_budget(self) -> int | None:
        return self.spec.format_failure_budget

    @property
    def attempts_in_budget(self) -> int:
        # An operator's retry starts a new budget (budget_attempt_base); an undo has its own.
        step = self.step
        return step.compensation_attempt if self.undo else \
            step.attempt - step.budget_attempt_base

    @property
    def attempts_in_all(self) -> int:
        return self.step.compensation_attempt if self.undo else self.step.attempt

    @property
    def budget_started_at(self):
        return self.step.budget_started_at

    @property
    def resend_action(self) -> str:
        return AuditAction.COMPENSATION_RETRY_SCHEDULED if self.undo else \
            AuditAction.RETRY_SCHEDULED

    def data(self, **more) -> dict:
        return more

    def sealed(self, value):
        return redact(value)

    def release(self) -> None:
        self.step.lease_owner, self.step.lease_expires_at = "", None

    def save(self, change: Change) -> None:
        change.step_changed(self.step)

    def wait_until(self, change: Change, at) -> None:
        change.step_changed(self.step)

    def stopped(self, change: Change, message: str) -> None:
        self.release()
        change.step_changed(self.step)

    def succeeded(self, change: Change, before: str) -> None:
        # Counted on from the run's count (every transition that moves a step in or out of
        # the done ones keeps it), not by a pass over every step row at every step: that
        # made a run of thousands of steps quadratic in its length.
        if before not in DONE_STEP_STATUSES:
            change.run.steps_done += 1

    def settle_next(self, lease) -> None:
        # The executor looks the step up by key before anything else is written.
        lease.work, lease.settle_first = self.step, True

    def restart_budget(self) -> None:
        reset_budget(self.step)

    def fresh(self) -> "StepEffect":
        return StepEffect(self.context, Step.objects.get(pk=self.step.pk), undo=self.undo)

    # The wait for a person: only the stop verdict (stop_gate) holds a step's attempts. The
    # approval names the attempt it allows, so the attempt after that asks again.

    approval_action = AuditAction.APPROVAL_REQUESTED
    decision_action = AuditAction.APPROVAL_DECIDED
    # A rejected attempt fails the step for good: a business outcome, not an error to retry.
    declined_stops_run = True

    @cached_property
    def verdict(self):
        return effect_verdict(self.spec)

    def needs_person(self) -> bool:
        return self.verdict is not None

    def approved(self) -> bool:
        return self.step.approved_attempt == self.step.attempt + 1

    def spend_approval(self) -> None:
        pass  # spent by the attempt it names: the next has another number

    def hold_for_person(self, change: Change) -> None:
        step, context = self.step, self.context
        # What it will send, computed now (nothing is called), so the person approves it.
        step.intended_action = intended_action(context.definition, self.spec, change.run,
                                               context.steps, step)
        wait_began(step, change.now)
        step.next_attempt_at = None
        change.step_changed(step)

    @property
    def waited_on(self) -> tuple:
        return (self.step,)

    @property
    def wait_message(self) -> str:
        return stop_gate.WAIT_MESSAGE.format(step=self.name, attempt=self.step.attempt + 1,
                                             reason=self.verdict.reason)

    def approval_data(self) -> dict:
        step, verdict = self.step, self.verdict
        return {"verdict": verdict.decision, "why": verdict.reason,
                "attempt": step.attempt + 1, "key": step.idempotency_key,
                "will_do": step.intended_action}

    def grant(self, change: Change, by: str) -> None:
        step = self.step
        step.approved_attempt = step.attempt + 1
        step.status = PENDING if step.attempt == 0 else SCHEDULED
        change.step_changed(step)

    def decline(self, change: Change, by: str, comment: str) -> None:
        step = self.step
        step.status = FAILED
        step.finished_at = change.now
        step.error_class = ErrorClass.PERMANENT
        step.error_message = (f"attempt {step.attempt + 1} rejected by {by}"
                              f"{': ' + comment if comment else ''}; nothing was sent")
        change.step_changed(step)

    def decision_data(self, **data) -> dict:
        return {**data, "attempt": self.step.attempt + 1}


class CallEffect(EffectRow):
    """One tool call of an agent step: the row is the ToolCall; the agent step holds it
    (scheduled while the call waits, stopped with it when it stops the run)."""

    status_key = "call_status"
    format_budget = None  # a tool call has no model output of its own to reject
    undo = False
    resend_action = AuditAction.RETRY_SCHEDULED

    def __init__(self, context, step: Step, call: ToolCall):
        self.context, self.row, self.step = context, call, step
        # Taken while the call is in flight: the records written now end its attempt, and
        # carry the intent its row holds (one record per attempt).
        self.ends_attempt = call.status in (RUNNING, StepStatus.COMPENSATING)
        self.undoing = call.status == StepStatus.COMPENSATING
        self.label = f"tool {call.tool} (call {call.ref})"
        self.name = f"{step.name}: {self.label}"

    @cached_property
    def spec(self) -> definition.ToolSpec:
        return self.context.definition.step(self.step.name).tools[self.row.tool]

    @property
    def attempts_in_budget(self) -> int:
        return self.row.attempt

    @property
    def attempts_in_all(self) -> int:
        return self.row.attempt

    @property
    def budget_started_at(self):
        # An operator's retry clears started_at: the elapsed budget starts again.
        return self.row.started_at

    def data(self, **more) -> dict:
        # A step's records get its intent from the kernel (Change.audit); the records that
        # end a call's attempt carry the call's own, checkpointed in its row.
        intent = intent_of(self.row, undo=self.undoing) if self.ends_attempt else {}
        return {"tool_call": self.row.ref, "tool": self.row.tool, **intent, **more}

    def sealed(self, value):
        return sensitive.seal_result(value, self.spec)

    def release(self) -> None:
        pass  # the agent step holds the lease, not the call

    def save(self, change: Change) -> None:
        call = self.row
        if call.status == FAILED:
            call.finished_at = change.now  # a call's row says when it ended
        call.updated_at = change.now
        call.save()
        change.step_changed(self.step)  # the step's updated_at: progress within the step

    def wait_until(self, change: Change, at) -> None:
        self.save(change)
        step = self.step
        step.status, step.next_attempt_at = SCHEDULED, at
        self.step_waits()
        change.step_changed(step)

    def step_waits(self) -> None:
        """The agent step waits with its call (the call's backoff, its next lookup, a
        person's approval of its arguments), no worker held. The step's own retry budget is
        for the errors of its model turns (runs.agents.agent_loop), and the model has
        answered since the last of them (this call is its answer): the wait is no failure
        of the step. So the claim that resumes the step is the first attempt of a new budget
        (restart_retry_budget, the part of a person's retry that starts one) and its elapsed
        time runs from that claim (lease_cycle.advance), not through the wait. The call's own
        budget counts the call's waits."""
        step = self.step
        step.lease_owner, step.lease_expires_at = "", None
        restart_retry_budget(step)

    def stopped(self, change: Change, message: str) -> None:
        """The agent step stops with its call, in the call's state."""
        self.save(change)
        step, call = self.step, self.row
        step.status = UNKNOWN if call.status == UNKNOWN else FAILED
        step.error_class = ErrorClass.UNKNOWN if call.status == UNKNOWN else call.error_class
        step.error_message = f"{self.label}: {message}"
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)

    def succeeded(self, change: Change, before: str) -> None:
        pass  # the agent goes on: its next turn is told the result

    def settle_next(self, lease) -> None:
        pass  # the agent loop settles its unknown calls before anything else

    def restart_budget(self) -> None:
        """A person sends the call again: its elapsed budget and lookups start again (its
        attempts go on counting), and its step runs it."""
        call = self.row
        call.finished_at, call.started_at, call.next_attempt_at = None, None, None
        call.lookup_failures = 0
        self.step.status = PENDING
        reset_budget(self.step)

    def fresh(self) -> "CallEffect":
        return CallEffect(self.context, Step.objects.get(pk=self.step.pk),
                          ToolCall.objects.get(pk=self.row.pk))

    # The wait for a person: a tool with the stop verdict (stop_gate) waits before each
    # attempt, a tool may ask for approval of some arguments (ToolSpec.needs_approval), and
    # a write waits while an earlier call of its tool may land beside it (repeats). The
    # approval is bound to the arguments' hash; the stop verdict's allows one attempt.

    approval_action = AuditAction.TOOL_CALL_APPROVAL_REQUESTED
    decision_action = AuditAction.TOOL_CALL_APPROVAL_DECIDED
    # A declined call never runs and the model is told in its next turn: the agent goes on.
    declined_stops_run = False

    @cached_property
    def gated(self) -> bool:
        return stop_gate.is_gated(self.spec)

    @cached_property
    def may_land_beside(self) -> ToolCall | None:
        """An earlier call of this tool a person settled as not done, which may yet land
        beside this one (repeats.earlier_call_may_land): a write waits for a person."""
        return earlier_call_may_land(self.row) if self.spec.has_side_effect else None

    def needs_person(self) -> bool:
        tool = self.spec
        return self.gated or self.may_land_beside is not None or call_asks_a_person(
            tool, tool.args.model_validate(sensitive.opened(self.row.arguments)))

    def approved(self) -> bool:
        return self.row.approved_hash == self.row.args_hash

    def spend_approval(self) -> None:
        # In the row the intent checkpoint saves next. An approval of these arguments
        # alone is spent only by a person's resend (agent_operator.retry_tool_call).
        if self.gated:
            self.row.approved_hash = ""

    def hold_for_person(self, change: Change) -> None:
        """The call waits, and its step with it; no worker is held meanwhile."""
        wait_began(self.step, change.now, call=self.row)
        self.step_waits()
        self.save(change)

    @property
    def waited_on(self) -> tuple:
        return (self.step, self.row)

    @property
    def wait_message(self) -> str:
        earlier = self.may_land_beside
        if self.gated:
            # The stop verdict: the person approves this attempt, whatever its arguments,
            # and is told so as for a step (StepEffect.wait_message).
            said = stop_gate.WAIT_MESSAGE.format(step=self.name, attempt=self.row.attempt + 1,
                                                 reason=effect_verdict(self.spec).reason)
            return said + (f"; {repeat_warning(earlier)}" if earlier is not None else "")
        if earlier is not None:
            return (f"{self.name} waits for a person's approval of its arguments: "
                    f"{repeat_warning(earlier)}")
        return f"{self.name} waits for a person's approval of its arguments"

    def approval_data(self) -> dict:
        call, earlier = self.row, self.may_land_beside
        verdict = effect_verdict(self.spec) if self.gated else None
        return self.data(args_hash=call.args_hash,
                         arguments=sensitive.shown(self.spec, call.arguments),
                         # As a step's record says which attempt is approved, and why.
                         **({"verdict": verdict.decision, "why": verdict.reason,
                             "attempt": call.attempt + 1} if verdict is not None else {}),
                         **({"may_land_beside": earlier.ref} if earlier is not None else {}))

    def grant(self, change: Change, by: str) -> None:
        call = self.row
        call.status, call.approved_hash, call.approved_by = PENDING, call.args_hash, by[:200]
        self.step.status = PENDING
        self.save(change)

    def decline(self, change: Change, by: str, comment: str) -> None:
        call = self.row
        call.status, call.finished_at = ToolCallStatus.DECLINED, change.now
        call.error_message = f"declined by {by}: {comment}".strip()
        self.step.status = PENDING
        self.save(change)

    def decision_data(self, **data) -> dict:
        return self.data(**data, args_hash=self.row.args_hash)


Effect = StepEffect | CallEffect
