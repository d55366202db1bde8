"""Perform an operator action from the command line, as a named user, through the same
table (runs.actions), permission rule and transitions as the console."""

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
        given = ActionInput(reason=options["reason"], step=options["step"], mode=options["mode"],
                          remote_ref=options["remote_ref"], evidence=options["evidence"])
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
