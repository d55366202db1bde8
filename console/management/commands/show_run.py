"""Show one run from the command line: its state, its steps and the actions it offers, as
text or --json. With --user NAME, as that person reads it (it only reads, so, as list_runs
--user, it asks for no password): a run they may not view is refused, and where they may not
take the advised next step it says who may, as their investigation card does."""

from django.core.management.base import CommandError

from api.selectors import hold_of, run_view
from audit.arguments import ValuesCutShortCommand
from console.cli import id_given, no_run, print_json, user_named
from runs.machine import transitions
from runs.machine.storable import written_visibly
from runs.models import Run
from runs.operator.guidance import for_reader, recommend
from runs.permissions import VIEW, grant_for


class Command(ValuesCutShortCommand):
    help = "Show a run: its state, steps (key, remote reference, last error) and actions."

    def add_arguments(self, parser):
        # Read as text: int() reads "٢" as 2 (console.cli.id_given).
        parser.add_argument("run")
        parser.add_argument("--user", default="",
                            help="show it as this user reads it (a username): the next step "
                                 "says who may take it where they may not")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        run_id = id_given(options["run"], name="run id", thing="run")
        reader = user_named(options["user"]) if options["user"] else None
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(no_run(run_id, user=reader)) from None
        if reader is not None and not grant_for(reader, VIEW).covers(run.workflow_id):
            raise CommandError(f"{reader.get_username()} may not view run {run_id} (needs "
                               f"runs.{VIEW} on {run.workflow_name})")
        view = run_view(run)
        # The console's next-step card and the API's investigation give this advice: the
        # same function, so a person at the command line is told the same thing.
        advice = recommend(run, view.steps)
        next_line = None
        if advice is not None:
            label = f"{advice.action.label}: " if advice.action else ""
            where = f"{advice.step}: " if advice.step else ""
            next_line = label + where + advice.why
            if reader is not None:
                next_line = for_reader(next_line, run, advice.action, reader)
        shown = {
            "id": run.pk, "workflow": run.workflow_name, "workflow_version": run.workflow_version,
            "business_key": run.business_key, "drill": run.drill, "state": view.state,
            "status": run.status,
            "description": view.description, "attention_reason": run.attention_reason or None,
            "message": run.status_message,
            "dispatch_pause": hold_of(view),
            "created_at": run.created_at,
            "updated_at": run.updated_at, "finished_at": run.finished_at,
            "steps": [{"name": s.name, "kind": s.kind, "impact": s.impact, "status": s.status,
                       "attempt": s.attempt, "idempotency_key": s.idempotency_key,
                       "remote_ref": s.remote_ref, "error_class": s.error_class or None,
                       "error": s.error_message,
                       # A wait the run's end ended reads `waiting` still: said so.
                       "wait_ended": view.ended_waits.get(s.name),
                       # Its reference names who approved, as a person's approval's does:
                       # that no person was asked is said apart, as the run page says it.
                       "approved_unasked": transitions.rule_approval_words(s) or None}
                      for s in view.steps],
            "operator_actions": [{"name": a.name, "label": a.label,
                                  "needs_second_person": a.needs_second_person(view.steps)}
                                 for a in view.operator_actions],
            "next_step": None if advice is None else {
                "action": advice.action_name or None, "step": advice.step or None,
                "why": advice.why, "runbook": advice.reason,
                # The card's next step, as --user reads it: the line the text output prints.
                "text": next_line},
        }
        if options["json"]:
            print_json(self.stdout, shown)
            return
        # A drill run (manage.py drill) reads as real work unless it says it is not.
        self.stdout.write(f"run {run.pk}: {run.workflow_name} v{run.workflow_version} "
                          f"{written_visibly(run.business_key)}"
                          + (" [drill run: manage.py remove_drill_runs removes it]"
                             if run.drill else ""))
        self.stdout.write(f"  {view.description}")
        # One line each: a line break in a reason (kept in the status message) or in what a
        # remote system answered (its error, the reference it gave), written as it is, would
        # forge a line of this listing, and an escape sequence would reach the terminal.
        if run.status_message:
            self.stdout.write(f"  {written_visibly(run.status_message)}")
        for step in shown["steps"]:
            unasked = step["approved_unasked"]
            self.stdout.write(f"  {step['name']:<24} {step['status']:<20} attempt "
                              f"{step['attempt']}  ref {written_visibly(step['remote_ref'] or '-')}"
                              f"{'  ' + written_visibly(step['error']) if step['error'] else ''}"
                              f"{'  (' + step['wait_ended'] + ')' if step['wait_ended'] else ''}"
                              f"{'  (' + unasked + ')' if unasked else ''}")
        if advice is not None:
            self.stdout.write(f"  next: {written_visibly(next_line)}")
            self.stdout.write(f"  runbook: docs/operations.md#runbook-{advice.reason}")
        actions = ", ".join(a["name"] + (" (four eyes)" if a["needs_second_person"] else "")
                            for a in shown["operator_actions"])
        self.stdout.write(f"  actions: {actions or 'none'}")
