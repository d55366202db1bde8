"""Perform an operator action from the command line, as a named user, through the one
function every caller uses (approvals.operator_actions.act): the same table, permission
rule, four-eyes rule and transitions as the console and the API.

Four eyes: an action that needs a second person opens an approval request, as it does in
the console. The second person decides it as themselves: in the console, over the API, or
here with --decide REQUEST --user B. An action, and a decision, is taken only once USER has
given their password (asked for, or read from CLI_PASSWORD: console.cli.proven), so
that nobody acts, asks or agrees in another person's name. The list of what a run offers
USER reads only and asks for none.
"""

import uuid

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.urls import reverse

from approvals.decisions import DecisionRefused, decide, decision_refusal
from approvals.models import ApprovalRequest, RequestKind
from approvals.operator_actions import (
    ActionInputError,
    InputNotRead,
    NoSuchAction,
    NoSuchRun,
    act,
    refuse_input_not_read,
)
from approvals.permissions import can_view
from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from console.cli import id_given, no_run, print_json, proven, storable_text, user_named
from runs import store
from runs.machine import transitions
from runs.machine.errors import EvidenceRequired, TransitionNotAllowed
from runs.machine.storable import written_visibly
from runs.models import Run, Step
from runs.operator.action_input import (
    CALL_WITHOUT_STEP,
    call_id_problem,
    call_refused,
    field_refused,
    target_missing,
)
from runs.operator.actions import ACTIONS, ActionInput
from runs.permissions import grants_of


class Command(ValuesCutShortCommand):
    help = ("Perform an operator action on a run as USER: " + ", ".join(ACTIONS)
            + ". Without an action, list what the run offers. With --decide REQUEST, decide "
              "a four-eyes request as USER (authenticated by password).")

    def add_arguments(self, parser):
        # The ids are read as text: int() reads "٢" as 2 (console.cli.id_given).
        parser.add_argument("run", nargs="?")
        parser.add_argument("action", nargs="?", choices=list(ACTIONS))
        parser.add_argument("--user", required=True, help="the person acting (a username)")
        # No defaults: an option given where it does not apply is refused, not dropped
        # (_refuse; for an action's own options, act's rule refuse_input_not_read).
        parser.add_argument("--reason")
        parser.add_argument("--step")
        parser.add_argument("--call", metavar="STEP:CALL",
                            help="the tool call, for the tool-call actions and for "
                                 "confirm_compensation paused at a call's undo: the agent "
                                 "step and the call's turn.index, e.g. triage:2.0 (or only "
                                 "2.0 with --step)")
        parser.add_argument("--mode", choices=["ask", "found", "not_found"],
                            help="reconcile: ask the remote system (the default), or record "
                                 "by hand")
        parser.add_argument("--remote-ref", help="reconcile --mode found: the effect's "
                                                 "reference in the remote system")
        parser.add_argument("--evidence", help="reconcile by hand: what established it; "
                                               "event_received: the payload (JSON)")
        parser.add_argument("--decide", metavar="REQUEST",
                            help="decide this four-eyes approval request as USER")
        parser.add_argument("--reject", action="store_true",
                            help="with --decide: reject (the default is to approve)")
        parser.add_argument("--comment", help="with --decide: the decision's comment")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args, **options):
        # A person waits at the prompt: a run another session holds (left idle in a
        # transaction) ends the command with one line after DB_LOCK_TIMEOUT (console.entry),
        # as a web request ends, instead of holding it without end.
        with store.current().lock_wait_at_most(settings.DB_LOCK_TIMEOUT):
            return self._handle(**options)

    def _handle(self, **options):
        # An action's own fields are held to its input's rule below, in every door's words.
        # and a decision's comment to decide's (decision_refusal).
        storable_text({k: v for k, v in options.items()
                       if k not in _ACTION_OPTIONS and k != "comment"})
        if options["run"] is not None:
            options["run"] = id_given(options["run"], name="run id", thing="run")
        if options["decide"] is not None:
            options["decide"] = id_given(options["decide"], name="request id (--decide)",
                                         thing="four-eyes request")
        user = user_named(options["user"])
        if options["decide"] is not None:
            _refuse(_given(options, _ACTION_OPTIONS), "with --decide (the request says what "
                    "is done)")
            # decide's own rule, asked before the password so that a wrong command costs none.
            _refuse_decision(options)
            # The second person proves who they are: naming them is not agreeing for them.
            return self._decide(proven(user, nothing="nothing decided"), options)
        _refuse(_given(options, _DECIDE_OPTIONS), "without --decide REQUEST")
        if options["run"] is None:
            raise CommandError("give a run id (or --decide REQUEST)")
        if not options["action"]:
            _refuse(_given(options, _ACTION_OPTIONS), "without an action (the list of what "
                    "the run offers takes only --user and --json)")
            return self._offered(user, options["run"], options["json"])
        spec = ACTIONS[options["action"]]
        for name in _ACTION_OPTIONS:
            # Before --call is read as STEP:TURN.INDEX: the rule of the text of every field.
            if (refused := field_refused(name, (options[name] or "").strip())) is not None:
                raise CommandError(transitions.not_done(spec.label, refused))
        step, call = target(options["step"] or "", options["call"] or "")
        if call and not spec.names_call:
            # As act's rule says it (refuse_input_not_read), before --call's step counts.
            _refuse(["--call"], f"with {spec.name}")
        given = ActionInput(reason=options["reason"] or "", step=step,
                            mode=options["mode"] or "ask",
                            remote_ref=options["remote_ref"] or "",
                            evidence=options["evidence"] or "", call=call)
        try:
            # act's own rule, asked before the password so that a wrong command costs none.
            refuse_input_not_read(spec.name, given)
        except InputNotRead as exc:
            _refuse([_ACTION_OPTIONS[name] for name in exc.fields],
                    f"with {spec.name}" + (f" --mode {exc.mode}" if exc.mode else ""))
        if (spec.takes_step and not step) or (spec.takes_call and not call):
            # The console's form offers the run's steps; a command line has to be told them.
            raise CommandError(_target_missing(user, spec, options["run"], given))
        # Asked once the options are known to be right: the first person of a four-eyes
        # request proves who they are as the second does.
        user = proven(user)
        try:
            outcome = act(options["action"], options["run"], user=user, given=given)
        except NoSuchRun:
            raise CommandError(no_run(options["run"], user=user)) from None
        except (NoSuchAction, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        except EvidenceRequired as exc:
            # The transition's words serve every caller; a command line names its option.
            raise CommandError(transitions.not_done(ACTIONS[options["action"]].label,
                                                    f"{exc}. Give it with --evidence.")) from None
        except (ActionInputError, TransitionNotAllowed) as exc:
            # Input the action needs and was not given: named by its option, as --evidence.
            missing = getattr(exc, "missing", "")
            hint = f" Give it with {_ACTION_OPTIONS[missing]}." if missing else ""
            raise CommandError(transitions.not_done(ACTIONS[options["action"]].label,
                                                    f"{exc}{hint}")) from None
        if options["json"]:
            print_json(self.stdout, {
                "action": outcome.action, "run": outcome.run_id, "done": outcome.done,
                "status": outcome.run.status if outcome.run else None,
                "approval_request": outcome.approval.pk if outcome.approval else None,
                "message": outcome.message})
        elif outcome.done:
            self.stdout.write(f"{outcome.message} run {outcome.run_id} is {outcome.run.status}")
        else:
            self.stdout.write(f"{outcome.message} Another person decides it: run_action "
                              f"--decide {outcome.approval.pk} --user THEM")

    def _offered(self, user, run_id: int, as_json: bool):
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(no_run(run_id, user=user)) from None
        steps = list(Step.objects.filter(run=run).order_by("position"))
        # What `user` may do: the permission rule the action checks (runs.permissions), on
        # the run's workflow, asked once per permission; then what the run's state allows.
        grants = grants_of(user)
        refusals = {}
        for name, action in ACTIONS.items():
            permitted = grants(action.permission).covers(run.workflow_id)
            refusals[name] = (permitted, action.refusal(run, steps) if permitted else
                              f"{user.get_username()} may not {action.label.lower()} run "
                              f"{run_id} (needs runs.{action.permission})")
        # As show_run marks them: the one four-eyes rule the action itself is held to.
        four_eyes = {name: action.needs_second_person(steps) for name, action in ACTIONS.items()}
        if as_json:
            print_json(self.stdout, [{"action": name, "offered": refused is None,
                                      "permitted": permitted, "refusal": refused,
                                      "needs_second_person": four_eyes[name]}
                                     for name, (permitted, refused) in refusals.items()])
            return
        for name, (_, refused) in refusals.items():
            said = f"-: {refused}" if refused else \
                "offered" + (" (four eyes)" if four_eyes[name] else "")
            self.stdout.write(f"{name:22} {said}")

    def _decide(self, user, options):
        request = ApprovalRequest.objects.filter(pk=options["decide"]).first()
        if request is None or request.kind != RequestKind.OPERATOR_ACTION:
            raise CommandError(_not_four_eyes(options["decide"], request, user))
        # A run or action named beside --decide must be the request's: deciding another
        # run's request than the one the person named would act on the wrong run.
        if ((options["run"] is not None and options["run"] != request.run_id)
                or (options["action"] and options["action"] != request.action)):
            raise CommandError(f"request {request.pk} is about {request.action} of run "
                               f"{request.run_id}, not {options['action'] or 'an action'} of "
                               f"run {options['run'] or request.run_id}; nothing decided")
        try:
            decision = decide(request.pk, user=user, approved=not options["reject"],
                              decision_id=uuid.uuid4(), comment=options["comment"] or "")
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        except DecisionRefused as exc:
            raise CommandError(_decision_refused(str(exc), exc.field)) from None
        if options["json"]:
            print_json(self.stdout, {"request": request.pk, "outcome": decision.outcome,
                                     "status": decision.request.status,
                                     "application": decision.application,
                                     "message": decision.message})
        elif decision.recorded:
            # One not recorded is told once, by the error below.
            self.stdout.write(decision.message)
        if not decision.recorded:
            raise CommandError(decision.message)


# The options of an action (ActionInput's fields) and of a decision, with their flags.
_ACTION_OPTIONS = {"reason": "--reason", "step": "--step", "call": "--call", "mode": "--mode",
                   "remote_ref": "--remote-ref", "evidence": "--evidence"}
_DECIDE_OPTIONS = {"reject": "--reject", "comment": "--comment"}


def _not_four_eyes(request_id: int, request: ApprovalRequest | None, user) -> str:
    """Why --decide REQUEST decides nothing when REQUEST is no four-eyes request: none by
    that id, or an approval step's or a tool call's request (which this command does not
    decide), said with where it is decided to whoever may see it on its page (can_view);
    to anyone else, as if there were none."""
    if request is None or not can_view(user, request):
        return f"no four-eyes request {request_id}"
    what = ("a tool-call approval" if request.kind == RequestKind.TOOL_CALL
            else "a step approval")
    return (f"approval request {request_id} is {what} ({written_visibly(request.subject)} "
            f"of run {request.run_id}), not a four-eyes request: decide it on its page "
            f"{reverse('approvals:detail', args=[request_id])} or over the API (POST "
            f"/api/approvals/{request_id}/decision); nothing decided")


def _refuse_decision(options) -> None:
    refusal = decision_refusal(approved=not options["reject"], comment=options["comment"] or "")
    if refusal is not None:
        raise CommandError(_decision_refused(refusal, "comment"))


def _decision_refused(refusal: str, field: str) -> str:
    flag = _DECIDE_OPTIONS.get(field, f"--{field}")
    return f"{refusal} Give it with {flag}. Nothing was decided."


def _target_missing(user, spec, run_id: int, given: ActionInput) -> str:
    """Why a step or tool-call action given no --step or --call was not done, in the words
    every door uses (runs.operator.action_input.target_missing), to a person who may take it
    there; with the option that names it."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return no_run(run_id, user=user)
    if not grants_of(user)(spec.permission).covers(run.workflow_id):
        return (f"{user.get_username()} may not {spec.label.lower()} run {run_id} (needs "
                f"runs.{spec.permission}). Nothing was done.")
    steps = list(Step.objects.filter(run=run).order_by("position"))
    missing = target_missing(spec, run, steps, given)
    flag = "--call STEP:TURN.INDEX" if spec.takes_call else "--step"
    return transitions.not_done(spec.label, f"{missing}" + (
        f" Give it with {flag}." if isinstance(missing, ActionInputError) else ""))


def _given(options, flags: dict) -> list[str]:
    return [flag for name, flag in flags.items() if options[name] not in (None, False)]


def _refuse(flags: list[str], where: str) -> None:
    # An option that would be dropped unseen is refused: the person meant something by it.
    if flags:
        raise CommandError(f"{', '.join(flags)} {'does' if len(flags) == 1 else 'do'} not "
                           f"apply {where}; leave {'it' if len(flags) == 1 else 'them'} out. "
                           "Nothing was done.")


def target(step: str, call: str) -> tuple[str, str]:
    """(step, call) from --step and --call: --call names STEP:TURN.INDEX, or TURN.INDEX of
    the step --step names."""
    step, call = step.strip(), call.strip()
    if not call:
        return step, ""
    named, sep, ref = call.rpartition(":")
    if sep:
        if not named:
            raise CommandError(f"--call {quoted(call)}: give it as STEP:TURN.INDEX, e.g. "
                               "triage:2.0")
        if step and named != step:
            raise CommandError(f"--call names step {quoted(named)} but --step says "
                               f"{quoted(step)}")
        step = named
    # The rule every door holds a call to (the API's `call`, the console's form:
    # action_input.call_refused), before the run's state is asked, in this command's words.
    if (refused := call_refused(step, ref)) is None:
        return step, ref
    if refused.field == "step":
        raise CommandError(f"--call {quoted(call)}: {CALL_WITHOUT_STEP}; name the agent step "
                           "too, as STEP:TURN.INDEX (e.g. triage:2.0), or with --step")
    raise CommandError(f"--call {quoted(call)}: {call_id_problem(ref)}")
