"""Perform an operator action from the command line, as a named user, through the same
table (runs.actions), permission rule and transitions as the console."""

import re

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from audit.chain import Actor
from console.permissions import grant_for
from runs.actions import ACTIONS, ActionInput, ActionInputError
from runs.errors import TransitionNotAllowed
from runs.models import Run, Step


class Command(BaseCommand):
    help = ("Perform an operator action on a run as USER: "
            + ", ".join(ACTIONS) + ". Without an action, list what the run offers.")

    def add_arguments(self, parser):
        parser.add_argument("run", type=int)
        parser.add_argument("action", nargs="?", choices=list(ACTIONS))
        parser.add_argument("--user", required=True, help="the person acting (a username)")
        parser.add_argument("--reason", default="")
        parser.add_argument("--step", default="")
        parser.add_argument("--call", default="", metavar="STEP:CALL",
                            help="the tool call, for the tool-call actions: the agent step "
                                 "and the call's turn.index, e.g. triage:2.0 (or only 2.0 "
                                 "with --step)")
        parser.add_argument("--mode", default="ask", choices=["ask", "found", "not_found"],
                            help="reconcile: ask the remote system, or record by hand")
        parser.add_argument("--remote-ref", default="")
        parser.add_argument("--evidence", default="")
        parser.add_argument("--approved-by", default="",
                            help="the second person (a username) where four eyes apply")

    def handle(self, *args, **options):
        user = self._user(options["user"])
        try:
            run = Run.objects.get(pk=options["run"])
        except Run.DoesNotExist:
            raise CommandError(f"no run {options['run']}") from None
        steps = list(Step.objects.filter(run=run).order_by("position"))
        if not options["action"]:
            for action in ACTIONS.values():
                refused = action.refusal(run, steps)
                self.stdout.write(f"{action.name:22} {'-' if refused else 'offered'}"
                                  f"{': ' + refused if refused else ''}")
            return
        spec = ACTIONS[options["action"]]
        if not grant_for(user, spec.permission).covers(run.workflow_id):
            raise CommandError(f"{user.get_username()} may not {spec.label.lower()} run "
                               f"{run.pk} (needs runs.{spec.permission})")
        approved_by = None
        if options["approved_by"]:
            second = self._user(options["approved_by"])
            if not grant_for(second, spec.permission).covers(run.workflow_id):
                raise CommandError(f"{second.get_username()} may not approve "
                                   f"{spec.label.lower()} (needs runs.{spec.permission})")
            approved_by = Actor.for_user(second)
        step, call = target(options["step"], options["call"])
        if call and not spec.takes_call:
            raise CommandError(f"{spec.label} is not aimed at one tool call: leave out --call")
        if spec.takes_call and not call:
            raise CommandError(f"{spec.label} is aimed at one tool call: name it with --call "
                               "STEP:TURN.INDEX (the run page shows each call's turn.index)")
        given = ActionInput(reason=options["reason"], step=step, mode=options["mode"],
                            remote_ref=options["remote_ref"], evidence=options["evidence"],
                            call=call)
        try:
            run = spec.perform(run.pk, actor=Actor.for_user(user), given=given,
                               approved_by=approved_by)
        except (ActionInputError, TransitionNotAllowed) as exc:
            raise CommandError(f"{spec.label} was not done: {exc}") from None
        self.stdout.write(f"{spec.label}: done; run {run.pk} is {run.status}")

    def _user(self, username: str):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        if not user.is_active:
            raise CommandError(f"user {username!r} is not active")
        return user


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
