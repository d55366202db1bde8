"""Perform an operator action from the command line, as a named user, through the one
function every caller uses (approvals.operator_actions.act): the same table, permission
rule, four-eyes rule and transitions as the console and the API.

Four eyes: an action that needs a second person opens an approval request, as it does in
the console. The second person decides it as themselves: in the console, over the API, or
here with --decide REQUEST --user B, which asks for B's password (or reads it from the
RUN_ACTION_PASSWORD environment variable), so that nobody names another person as the
one who agreed.
"""

import getpass
import os
import re
import uuid

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from approvals.decisions import decide
from approvals.models import ApprovalRequest, RequestKind
from approvals.operator_actions import ActionInputError, NoSuchAction, NoSuchRun, act
from console.cli import print_json, user_named
from runs.machine.errors import TransitionNotAllowed
from runs.models import Run, Step
from runs.operator.actions import ACTIONS, ActionInput


class Command(BaseCommand):
    help = ("Perform an operator action on a run as USER: " + ", ".join(ACTIONS)
            + ". Without an action, list what the run offers. With --decide REQUEST, decide "
              "a four-eyes request as USER (authenticated by password).")

    def add_arguments(self, parser):
        parser.add_argument("run", type=int, nargs="?")
        parser.add_argument("action", nargs="?", choices=list(ACTIONS))
        parser.add_argument("--user", required=True, help="the person acting (a username)")
        parser.add_argument("--reason", default="")
        parser.add_argument("--step", default="")
        parser.add_argument("--call", default="", metavar="STEP:CALL",
                            help="the tool call, for the tool-call actions and for "
                                 "confirm_compensation paused at a call's undo: the agent "
                                 "step and the call's turn.index, e.g. triage:2.0 (or only "
                                 "2.0 with --step)")
        parser.add_argument("--mode", default="ask", choices=["ask", "found", "not_found"],
                            help="reconcile: ask the remote system, or record by hand")
        parser.add_argument("--remote-ref", default="")
        parser.add_argument("--evidence", default="")
        parser.add_argument("--decide", type=int, metavar="REQUEST",
                            help="decide this four-eyes approval request as USER")
        parser.add_argument("--reject", action="store_true",
                            help="with --decide: reject (the default is to approve)")
        parser.add_argument("--comment", default="")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args, **options):
        user = user_named(options["user"])
        if options["decide"] is not None:
            return self._decide(user, options)
        if options["run"] is None:
            raise CommandError("give a run id (or --decide REQUEST)")
        if not options["action"]:
            return self._offered(options["run"], options["json"])
        spec = ACTIONS.get(options["action"])
        step, call = target(options["step"], options["call"])
        if spec is not None and call and not spec.names_call:
            raise CommandError(f"{spec.label} is not aimed at one tool call: leave out --call")
        if spec is not None and spec.takes_call and not call:
            raise CommandError(f"{spec.label} is aimed at one tool call: name it with --call "
                               "STEP:TURN.INDEX (the run page shows each call's turn.index)")
        given = ActionInput(reason=options["reason"], step=step,
                            mode=options["mode"], remote_ref=options["remote_ref"],
                            evidence=options["evidence"], call=call)
        try:
            outcome = act(options["action"], options["run"], user=user, given=given)
        except (NoSuchAction, NoSuchRun, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        except (ActionInputError, TransitionNotAllowed) as exc:
            raise CommandError(f"{ACTIONS[options['action']].label} was not done: "
                               f"{exc}") from None
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

    def _offered(self, run_id: int, as_json: bool):
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(f"no run {run_id}") from None
        steps = list(Step.objects.filter(run=run).order_by("position"))
        refusals = {name: action.refusal(run, steps) for name, action in ACTIONS.items()}
        if as_json:
            print_json(self.stdout, [{"action": name, "offered": refused is None,
                                      "refusal": refused}
                                     for name, refused in refusals.items()])
            return
        for name, refused in refusals.items():
            self.stdout.write(f"{name:22} {'-' if refused else 'offered'}"
                              f"{': ' + refused if refused else ''}")

    def _decide(self, user, options):
        password = os.environ.get("RUN_ACTION_PASSWORD")
        if password is None:
            password = getpass.getpass(f"password of {user.get_username()}: ")
        # The second person proves who they are: naming them is not agreeing for them.
        if not user.check_password(password):
            raise CommandError(f"wrong password for {user.get_username()}; nothing decided")
        try:
            request = ApprovalRequest.objects.get(pk=options["decide"],
                                                  kind=RequestKind.OPERATOR_ACTION)
        except ApprovalRequest.DoesNotExist:
            raise CommandError(f"no four-eyes request {options['decide']}") from None
        try:
            decision = decide(request.pk, user=user, approved=not options["reject"],
                              decision_id=uuid.uuid4(), comment=options["comment"])
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            print_json(self.stdout, {"request": request.pk, "outcome": decision.outcome,
                                     "status": decision.request.status,
                                     "message": decision.message})
        else:
            self.stdout.write(decision.message)
        if not decision.recorded:
            raise CommandError(decision.message)


def target(step: str, call: str) -> tuple[str, str]:
    """(step, call) from --step and --call: --call names STEP:TURN.INDEX, or TURN.INDEX of
    the step --step names."""
    step, call = step.strip(), call.strip()
    if not call:
        return step, ""
    named, sep, ref = call.rpartition(":")
    if sep:
        if not named:
            raise CommandError(f"--call {call!r}: give it as STEP:TURN.INDEX, e.g. triage:2.0")
        if step and named != step:
            raise CommandError(f"--call {call!r} names step {named!r} but --step says "
                               f"{step!r}")
        step = named
    if not step:
        raise CommandError(f"--call {call!r}: name the agent step too, as STEP:TURN.INDEX "
                           "(e.g. triage:2.0), or with --step")
    if not re.fullmatch(r"\d+\.\d+", ref):
        raise CommandError(f"--call {call!r}: the call is TURN.INDEX, as the run page shows "
                           "it (e.g. 2.0)")
    return step, ref
