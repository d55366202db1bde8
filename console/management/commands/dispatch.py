"""Pause or resume a workflow's dispatch (for all its steps, or only those reaching one
remote system) as a named user with a reason, or show what is paused."""

import json

from django.conf import settings
from django.core.management.base import CommandError

from approvals.operator_actions import ActionForbidden, NoSuchWorkflow, act_on_workflow
from audit.arguments import ValuesCutShortCommand
from console.cli import acting_on_workflow, storable_text
from runs import store
from runs.machine import dispatch
from runs.machine.storable import written_visibly


class Command(ValuesCutShortCommand):
    help = "Show paused workflows, or pause/resume a workflow's dispatch."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True)
        status = sub.add_parser("status")
        status.add_argument("--json", action="store_true")
        for name in ("pause", "resume"):
            p = sub.add_parser(name)
            p.add_argument("workflow")
            p.add_argument("--system", default="",
                           help="only the steps that reach this remote system")
            p.add_argument("--user", required=True)
            p.add_argument("--reason", required=True)

    def handle(self, *args, **options):
        storable_text(options)
        if options["what"] == "status":
            dispatch.forget_cache()
            pauses = [p for ps in dispatch.current_pauses().values() for p in ps]
            if options["json"]:
                self.stdout.write(json.dumps([{
                    "workflow": p.workflow_name, "system": p.system, "reason": p.reason,
                    "paused_by": p.paused_by, "paused_at": p.paused_at.isoformat()}
                    for p in pauses], indent=2))
            if not pauses and not options["json"]:
                # Silence would read as a command that did nothing.
                self.stdout.write("no workflow or external system is paused: all dispatch")
            for p in [] if options["json"] else pauses:
                # One line a pause: a reason's line break, written as it is, would forge the
                # next pause's line (a person's reason may hold line breaks).
                self.stdout.write(f"{p.workflow_name}{' (' + p.system + ')' if p.system else ''}"
                                  f": paused by {p.paused_by} at {p.paused_at:%Y-%m-%d %H:%M}"
                                  f": {written_visibly(p.reason)}")
            return
        workflow, action = options["workflow"], f"{options['what']}_dispatch"
        try:
            user = acting_on_workflow(action, workflow, options["user"],
                                      system=options["system"])
            # A pause row another session holds (left idle in its transaction) ends the
            # command in one line after DB_LOCK_TIMEOUT (console.entry), nothing changed, as
            # run_action ends, instead of holding the person at the prompt without end.
            with store.current().lock_wait_at_most(settings.DB_LOCK_TIMEOUT):
                act_on_workflow(action, workflow, system=options["system"], user=user,
                                reason=options["reason"])
        except (NoSuchWorkflow, ActionForbidden, dispatch.DispatchError) as exc:
            raise CommandError(str(exc)) from None
        where = f" for {options['system']}" if options["system"] else ""
        self.stdout.write(f"{workflow}{where}: "
                          f"{'paused' if options['what'] == 'pause' else 'resumed'}")
