"""An operator action, with every check it owns, in one function for every caller.

The console's run page and its bulk job, the CLI and the API each call `act` in one line:
it checks the permission (runs.permissions, the one rule), the stale-page guard where the
caller drew a page, refuses input the action would not read (refuse_input_not_read), and
calls the action's transition through runs.operator.actions (which refuses what the run's
state does not allow, an empty reason and a missing step). Where the
transition is the action's first work, the check locks the run in the same query and the
transition goes on in that transaction with that row: one statement checks and locks, and
nothing can move the run between the page's check and the change. Where the
transition answers that a second person must agree (four eyes), `act` opens an approval
request instead, which another person decides as themselves (approvals.decisions); no
caller can name the second person, so no audit record names anyone who did not act.

Actions on a whole workflow (pausing and resuming its dispatch, or one of its schedules) go
through `act_on_workflow` the same way: one table, the permission (runs.machine.dispatch.may_pause)
checked there, and each caller calling it in one line.
"""

import dataclasses
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction

from audit.chain import Actor
from audit.quoting import quoted
from runs.definitions import definition
from runs.machine import dispatch
from runs.machine.errors import SecondPersonRequired, TransitionNotAllowed
from runs.machine.storable import text_problem
from runs.machine.transitions import within_caller_transaction
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, ActionInputError
from runs.operator.reconciliation import answer_by_key, answers_guarded
from runs.permissions import grant_for, run_access
from runs.waiting import schedules

from .four_eyes import request_operator_action
from .models import ApprovalRequest
from .withdrawal import HELD_WITH_ITS_REQUESTS, withdraw_unawaited_of

logger = logging.getLogger(__name__)

__all__ = ["WORKFLOW_ACTIONS", "ActionForbidden", "ActionInputError", "ActionOutcome",
           "InputNotRead", "NoSuchAction", "NoSuchRun", "NoSuchWorkflow", "StalePage", "act",
           "refuse_who_may_not_act",
           "act_on_workflow", "refuse_input_not_read", "refuse_workflow_action",
           "refuse_dispatch_input"]


class ActionForbidden(PermissionDenied):
    """The person may not take this action on this run; nothing was done."""


class NoSuchRun(LookupError):
    """No run has this id; nothing was done."""


class NoSuchWorkflow(LookupError):
    """No workflow (or no schedule of it) has this name; nothing was done."""


class NoSuchAction(LookupError):
    """The action is not one of the table's; nothing was done."""


class InputNotRead(ActionInputError):
    """Input given that the action (in its mode) would not read; nothing was done.
    `fields` are ActionInput's names, for a caller to show as its own (an API field, a CLI
    flag); `mode` is the reconcile mode that decided it, or ""."""

    def __init__(self, action: str, fields: list[str], mode: str = ""):
        self.action, self.fields, self.mode = action, fields, mode
        one = len(fields) == 1
        super().__init__(f"{', '.join(fields)} {'does' if one else 'do'} not apply with "
                         f"{action}{f' in mode {mode}' if mode else ''}; leave "
                         f"{'it' if one else 'them'} out. Nothing was done.")


def refuse_input_not_read(action: str, given: ActionInput) -> None:
    """Raise InputNotRead naming each field of `given` that holds a value the action would
    not read (OperatorAction.reads; a reconcile's depend on its mode). Dropped unseen, such
    input would leave the person believing it counted: evidence typed while asking by key,
    a reference with "not found". A field at its default was not given (every caller fills
    them all)."""
    spec = ACTIONS[action]
    reads = spec.reads(given.mode)
    blank = ActionInput(reason="")
    unread = [f.name for f in dataclasses.fields(ActionInput) if f.name not in reads
              and str(getattr(given, f.name)).strip() != getattr(blank, f.name)]
    if unread:
        raise InputNotRead(action, unread, given.mode if "mode" in reads else "")


class StalePage(TransitionNotAllowed):
    """The run moved on since the caller's page was drawn; nothing was done."""


@dataclass(frozen=True)
class ActionOutcome:
    """What became of an action: done (`run` is the run after it), or waiting for a second
    person (`approval` is the request, `created` False if it already waited)."""

    action: str
    run_id: int
    message: str
    run: Run | None = None
    approval: ApprovalRequest | None = None
    created: bool = False
    # A second person must agree and the caller gathers such runs into one request itself
    # (a bulk job): nothing was done and no request was made.
    deferred: bool = False

    @property
    def done(self) -> bool:
        return self.approval is None and not self.deferred


def act(action: str, run_id: int, *, user, given: ActionInput, seen: int | None = None,
        defer_second_person: bool = False,
        guard: Callable[[], None] | None = None) -> ActionOutcome:
    """Take operator action `action` on run `run_id` as `user`, with `given` (the reason and
    the action's parameters). `seen`: the run's audit sequence on the caller's page, if it
    has one; the action is refused if the run moved on since. `defer_second_person`: where a
    second person must agree, answer so (`deferred`) instead of opening a request (a bulk
    job opens one request for all such runs). `guard`: the caller's own last check, made
    after every other and before the transition, in its transaction with the run locked
    where the transition is the action's first work, and where a lookup by key comes first,
    before it and again in the transaction that records its answer; what it raises is
    raised (a bulk job's worker that lost the job, approvals.bulk_lease.hold), nothing
    written.

    Raises NoSuchAction, NoSuchRun, ActionForbidden (logged), StalePage, ActionInputError
    (incomplete input; InputNotRead: input the action would not read) or
    TransitionNotAllowed (the run's state refuses it, with the transition's words); in
    every case nothing was written."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise NoSuchAction(f"no action {action!r}; the actions are: {', '.join(ACTIONS)}")
    locks = spec.transition_first(given)
    try:
        with transaction.atomic(durable=True) if locks else nullcontext():
            access = run_access(user, spec.permission, run_id, lock=locks)
            # The permission first: a person who may not act learns nothing more. Then the
            # input, before anything is asked of another system (a reconcile by key).
            _check(access, action, spec, run_id, user, seen)
            refuse_input_not_read(action, given)
            if guard is not None:
                guard()
            # The locked row, as it was before the action (the checks' read, without a lock).
            before = access.run.status if access.run is not None else None
            waited = before == RunStatus.WAITING
            # Where a lookup by key comes before the transition, `guard` is made again
            # where its answer is recorded (answers_guarded): the lookup may be long.
            with within_caller_transaction(locked=access.run) if locks else \
                    answers_guarded(guard):
                run = spec.perform(run_id, actor=Actor.for_user(user), given=given)
        if spec.takes_call or (before is not None and before not in HELD_WITH_ITS_REQUESTS):
            # An action may end a wait for a person (a tool call cancelled, the run
            # terminated, cancelled or compensated): its request is withdrawn now, not at the
            # sweep's full look a minute later. Left pending, it stays in the approvers'
            # inboxes, the agent's next turn supersedes it as if the model had proposed a
            # change, and a run reopened and resumed meanwhile waits again on the request
            # asked before it ended. A run brought back from its end (reopen, re-run) loses
            # them before it can wait again. (From attention, a request is the same wait's,
            # taken up again when the run is resumed.)
            _withdraw_after_the_action(action, run_id)
    except SecondPersonRequired as exc:
        # The transition refused only for want of a second person (every other refusal
        # comes first): ask one. request_operator_action refuses an empty reason too.
        if defer_second_person:
            return ActionOutcome(action, run_id, message=str(exc), deferred=True)
        try:
            approval, created = request_operator_action(
                run_id, action=action, requested_by=user, reason=given.reason,
                params={"step": given.step} if given.step else None)
        except ValueError as exc:
            raise ActionInputError(str(exc)) from None
        return ActionOutcome(action, run_id, approval=approval, created=created,
                             message=_second_person_message(approval, created, given.reason))
    return ActionOutcome(action, run_id, run=run, message=_told_done(spec, run, given, waited))


def _committed() -> bool:
    """Whether the action is committed: act's caller holds no transaction of its own
    around it (a bulk job's may), so the transition's commit was its own."""
    return not transaction.get_connection().in_atomic_block


def _withdraw_after_the_action(action: str, run_id: int) -> None:
    """The requests the action ended, withdrawn now. After the action's commit, an error
    here (the database cancelled the statement, the connection was lost) must not reach the
    person as "nothing was done": the action is done, and the sweep's full look withdraws
    what is left. Within a caller's transaction the error is the caller's."""
    if not _committed():
        withdraw_unawaited_of(run_id)
        return
    try:
        withdraw_unawaited_of(run_id)
    except DatabaseError as exc:
        logger.warning("%s on run %s is done; withdrawing the requests it ended failed (%s: "
                       "%s): the sweep withdraws them", action, run_id, type(exc).__name__,
                       exc)


def _told_done(spec, run: Run, given: ActionInput, waited: bool) -> str:
    """_done's words; where its read fails after the action's commit, that the action is
    done all the same (not "nothing was done"), and where to see what it left."""
    if not _committed():
        return _done(spec, run, given, waited)
    try:
        return _done(spec, run, given, waited)
    except DatabaseError as exc:
        logger.warning("%s on run %s is done; reading what it left failed (%s: %s)",
                       spec.name, run.pk, type(exc).__name__, exc)
        return (f"{spec.label}: done. What it left could not be read just now (the database "
                "interrupted the read): the run's page shows it.")


def _second_person_message(approval, created: bool, reason: str) -> str:
    """What the person who asked is told. A request already waiting is the one the second
    person decides, with the reason it was asked with: one given now that differs is not
    added to it, and the person is told so rather than left to believe it was."""
    if created:
        return (f"A second person must approve this: approval request {approval.pk} created; "
                "nothing was done yet.")
    snapshot = approval.snapshot if isinstance(approval.snapshot, dict) else {}
    if approval.bulk_runs:
        # The run's one open request for the action is a bulk job's, which acts on all its
        # runs: the person is not to take it for a request about this run alone.
        return (f"A second person must approve this: approval request {approval.pk} already "
                f"asks it for this run among the {len(approval.bulk_runs)} runs of bulk job "
                f"{approval.params['bulk_job']}, asked by {snapshot.get('requested_by', '')} "
                "with its own reason; approved, it is taken on this run too. Nothing was done "
                "yet; once that request is decided, ask again if this run still needs it.")
    asked_with = str(snapshot.get("reason", ""))
    told = f"A second person must approve this: approval request {approval.pk} already waits"
    if (reason or "").strip() and (reason or "").strip() != asked_with:
        told += (f", asked by {snapshot.get('requested_by', '')} with the reason "
                 f"\"{asked_with}\"; the reason given now is not added to it (the approver "
                 "decides the request as it was asked)")
    return told + "; nothing was done yet."


# What a run waiting at a step of each kind waits for, and the actions that end that wait,
# named by the labels the run page shows for them. (A run waiting for a person's approval
# is not resumed at all: operator_rules.awaited_approval.)
_WAITS_FOR = {
    definition.EVENT: (f"an event ({ACTIONS['event_received'].label} or "
                       f"{ACTIONS['skip_event'].label} ends that wait)"),
    definition.SLEEP: f"its timer ({ACTIONS['wake_timer'].label} ends that wait)"}


def _done(spec, run: Run, given: ActionInput, waited: bool) -> str:
    """What the action did, in words: "done", except where that would mislead. A reconcile
    by key says what the remote system answered, which may be nothing; a resume of a run
    that waited at a step for an event or a timer says that it waits there again
    (the transition lets it go on from its checkpoint, which is that wait); a cancel of a
    run with a step in flight says that it is only asked for; a run ended with an effect
    unsettled says that it is not terminated yet, and what it waits for."""
    if given.mode == "ask" and "mode" in spec.reads(given.mode):
        return f"{spec.label}: " + answer_by_key(run, given.step,
                                                 given.call if spec.takes_call else "") + \
            _ending(spec, run)
    if spec.name == "cancel" and run.cancel_requested:
        return ("Cancel: asked for, not done yet: a step is in flight. The run stops at the "
                "next step boundary, once that step's outcome is recorded.")
    if spec.name == "resume" and waited:
        waiting = (Step.objects.filter(run=run, status=StepStatus.WAITING,
                                       kind__in=list(_WAITS_FOR))
                   .values_list("name", "kind").first())
        if waiting is not None:
            name, kind = waiting
            return (f"Resume: done, but resuming does not end a wait: the run goes on at "
                    f"{name}, where it waits again for {_WAITS_FOR[kind]}.")
    return f"{spec.label}: done." + _ending(spec, run)


def _ending(spec, run: Run) -> str:
    """What a run a person ended while an effect's outcome was unknown still waits for
    (AttentionReason.ENDED_UNSETTLED), or that settling its last such effect terminated it;
    else nothing. Read from the run the action returned: no query."""
    if run.status == RunStatus.ATTENTION and \
            run.attention_reason == AttentionReason.ENDED_UNSETTLED:
        return (f" The run is not terminated yet: it stays in attention until each effect "
                f"whose outcome is unknown is settled ({ACTIONS['reconcile'].label}). "
                f"{run.status_message}")
    if run.status == RunStatus.TERMINATED and spec.name in ("reconcile",
                                                            "reconcile_tool_call"):
        return (" That was the last unsettled effect of a run a person ended: the run is "
                "terminated now.")
    return ""


def refuse_who_may_not_act(action: str, run_id: int, *, user) -> None:
    """act's first check alone, for a caller that refuses a request before act can be
    asked (text no action can read): NoSuchRun, or ActionForbidden (logged), so that whoever
    may not act hears nothing of what they sent, nor whether the run exists."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise NoSuchAction(f"no action {action!r}; the actions are: {', '.join(ACTIONS)}")
    _check(run_access(user, spec.permission, run_id), action, spec, run_id, user, None)


def _check(access, action: str, spec, run_id: int, user, seen: int | None) -> None:
    if access is None:
        raise NoSuchRun(f"no run {run_id}")
    if not access.allowed:
        # An account deactivated since its holder (a bulk job's worker) read it holds
        # nothing: told as that, not as a permission to ask for.
        inactive = "the account is no longer active" if access.account_inactive else None
        logger.warning("refused %s on run %s for %s: %s", action, run_id, user.get_username(),
                       inactive or f"no {spec.permission} permission")
        raise ActionForbidden(f"{user.get_username()} may not {spec.label.lower()} run "
                              f"{run_id} ({inactive or f'needs runs.{spec.permission}'})")
    if seen is not None and seen != access.audit_seq:
        raise StalePage("The run moved on since this page was drawn: nothing was done. "
                        "Check its state and try again if still needed.")


def _pause_schedule(workflow, *, actor, reason, system, schedule):
    return schedules.set_paused(workflow=workflow, name=schedule, paused=True, actor=actor,
                                reason=reason)


def _resume_schedule(workflow, *, actor, reason, system, schedule):
    return schedules.set_paused(workflow=workflow, name=schedule, paused=False, actor=actor,
                                reason=reason)


def _pause_dispatch(workflow, *, actor, reason, system, schedule):
    return dispatch.pause_dispatch(workflow=workflow, system=system, actor=actor,
                                   reason=reason)


def _resume_dispatch(workflow, *, actor, reason, system, schedule):
    return dispatch.resume_dispatch(workflow=workflow, system=system, actor=actor,
                                    reason=reason)


# The actions on a whole workflow; each needs runs.machine.dispatch.PERMISSION on it.
WORKFLOW_ACTIONS = {"pause_dispatch": _pause_dispatch, "resume_dispatch": _resume_dispatch,
                    "pause_schedule": _pause_schedule, "resume_schedule": _resume_schedule}


def act_on_workflow(action: str, workflow: str, *, user, reason: str, system: str = "",
                    schedule: str = "", actor: Actor | None = None):
    """Take workflow action `action` (WORKFLOW_ACTIONS) on `workflow` as `user`: pause or
    resume its dispatch (towards `system` only, if given) or its schedule `schedule`.
    `actor`: how the record names who did it, if not `user` (an API token acts for the
    person named on it, with that person's permission: api.dispatch_routes). Returns what
    the action returns (the pause, the runs woken, the schedule's state).

    Raises NoSuchAction, ActionForbidden (logged), NoSuchWorkflow, or the action's own
    refusal (runs.machine.dispatch.DispatchError, runs.waiting.schedules.ScheduleError, text
    the database cannot store among them); in every case nothing was written. In that
    order, as `act`'s: the permission first (refuse_workflow_action), then the input."""
    refuse_workflow_action(action, workflow, user=user, schedule=schedule, system=system)
    _refuse_unstorable(action, reason=reason, system=system)
    return WORKFLOW_ACTIONS[action](workflow, actor=actor or Actor.for_user(user),
                                    reason=reason, system=system, schedule=schedule)


def refuse_workflow_action(action: str, workflow: str, *, user, schedule: str = "",
                           system: str = "") -> None:
    """The checks of act_on_workflow before it reads the input, in its order: raises
    NoSuchAction, ActionForbidden (logged), NoSuchWorkflow, or DispatchError naming a
    `system` no step reaches. For a caller that refuses input of its own only after them
    (the console's choice between pause and resume), or asks for a password only after
    them (the command line).

    The permission comes before the names: a person who may not pause the workflow is
    refused alike whether it (or its schedule) exists or not, so that names cannot be
    probed. Whoever may pause every workflow may also be told that one does not exist."""
    if action not in WORKFLOW_ACTIONS:
        raise NoSuchAction(f"no workflow action {quoted(action)}; the actions are: "
                           f"{', '.join(WORKFLOW_ACTIONS)}")
    # A name the database cannot hold is no workflow's, and cannot be asked of it: only
    # whoever may pause every workflow hears so.
    allowed = (dispatch.may_pause(user, workflow) if text_problem(workflow) is None
               else grant_for(user, dispatch.PERMISSION).everywhere)
    if not allowed:
        logger.warning("refused %s on %r for %s: no %s permission", action, workflow,
                       user.get_username(), dispatch.PERMISSION)
        raise ActionForbidden(f"{user.get_username()} may not pause or resume {workflow} "
                              f"(needs runs.{dispatch.PERMISSION})")
    _refuse_unknown_names(action, workflow, system=system, schedule=schedule)


def refuse_dispatch_input(action: str, workflow: str, *, reason: str,
                          system: str = "") -> None:
    """act_on_workflow's refusals of a pause or resume of `workflow`'s dispatch that are the
    same whoever asks, in its order: NoSuchAction (neither of those), NoSuchWorkflow, or
    DispatchError naming the field (a `system` no step reaches, a reason no record may
    keep). For a caller with no person to check (an API token acting for nobody), which
    names what is wrong with the request before it says that nobody may make it; whoever
    has a person calls act_on_workflow, which asks the permission before these."""
    if action not in ("pause_dispatch", "resume_dispatch"):
        raise NoSuchAction(f"no dispatch action {action!r}")
    _refuse_unknown_names(action, workflow, system=system, schedule="")
    _refuse_unstorable(action, reason=reason, system=system)
    # The action's own check of its input, which it makes again as it acts.
    dispatch.refuse_input(workflow, system, reason, lifting=action == "resume_dispatch")


def _refuse_unknown_names(action: str, workflow: str, *, system: str, schedule: str) -> None:
    # A pause a release left behind, of a workflow it removed or of a system no step
    # reaches now, is still lifted (runs.machine.dispatch lets a pause in force go).
    exists = definition.registry.latest(workflow) is not None
    # Asked only where the code no longer knows the workflow or may not know the system.
    in_force = action.endswith("_dispatch") and (not exists or bool(system)) and \
        dispatch.lifts_a_pause(workflow, system, lifting=action == "resume_dispatch")
    if not exists and not in_force:
        raise NoSuchWorkflow(f"no workflow {quoted(workflow)}")
    if action.endswith("_dispatch"):
        dispatch.refuse_unknown_system(workflow, system, in_force=in_force)
    if action.endswith("_schedule") and schedules.registry.get(workflow, schedule) is None:
        raise NoSuchWorkflow(f"no schedule {quoted(schedule)} of {quoted(workflow)}")


def _refuse_unstorable(action: str, *, reason: str, system: str) -> None:
    for name, text in (("reason", reason), ("system", system)):
        # Refused as the action refuses its input, so that every caller names the field.
        if (problem := text_problem(text)) is not None:
            if action.endswith("_schedule"):
                raise schedules.ScheduleError(f"{name}: {problem}.")
            raise dispatch.DispatchError(f"{name}: {problem}.", field=name)
