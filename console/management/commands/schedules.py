"""Schedules from the command line: list them with their next fire times and last runs,
run one tick of the scheduler (what beat does every SCHEDULES_INTERVAL_SECONDS), or pause
and resume one as a named user with a reason."""

import json

from django.conf import settings
from django.core.management.base import CommandError

from approvals.operator_actions import ActionForbidden, NoSuchWorkflow, act_on_workflow
from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from console.cli import acting_on_workflow, storable_text
from runs import store
from runs.reads.cursors import parse_stamp
from runs.reads.schedule_list import schedule_rows
from runs.waiting import schedules


class Command(ValuesCutShortCommand):
    help = "List schedules, run one scheduler tick, or pause/resume a schedule."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True)
        listing = sub.add_parser("list")
        listing.add_argument("--json", action="store_true")
        tick = sub.add_parser("tick")
        tick.add_argument("--now", default="", help="the time to tick at (ISO 8601)")
        for name in ("pause", "resume"):
            p = sub.add_parser(name)
            p.add_argument("workflow")
            p.add_argument("schedule")
            p.add_argument("--user", required=True)
            p.add_argument("--reason", required=True)

    def handle(self, *args, **options):
        storable_text(options)
        if options["what"] == "list":
            return self._list(options["json"])
        if options["what"] == "tick":
            return self._tick(options["now"])
        action, workflow = f"{options['what']}_schedule", options["workflow"]
        try:
            user = acting_on_workflow(action, workflow, options["user"],
                                      schedule=options["schedule"])
            # The schedule's row held by another session (left idle in its transaction) ends
            # the command in one line after DB_LOCK_TIMEOUT (console.entry), nothing changed,
            # as run_action ends. A tick is beat's work and keeps waiting, as beat's does.
            with store.current().lock_wait_at_most(settings.DB_LOCK_TIMEOUT):
                state = act_on_workflow(action, workflow, schedule=options["schedule"],
                                        user=user, reason=options["reason"])
        except (NoSuchWorkflow, ActionForbidden, schedules.ScheduleError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"schedule {state.name} of {state.workflow_name}: "
                          f"{'paused' if state.paused else 'running'}")

    def _tick(self, at: str) -> None:
        # Only what beat does: --now replays a tick at a past time (tests, drills); the rule
        # that it may not run ahead of the clock is fire_due_schedules'.
        now = None
        if at:
            now = parse_stamp(at)
            if now is None or now.tzinfo is None:
                raise CommandError(f"--now {quoted(at)} is not an ISO 8601 time with an offset, "
                                   "in the years 1 to 9999 in UTC")
        try:
            report = schedules.fire_due_schedules(now=now)
        except schedules.ScheduleError as exc:
            raise CommandError(f"--now: {exc}") from None
        self.stdout.write(json.dumps(report.said(run_ids=True)))

    def _list(self, as_json: bool) -> None:
        rows = schedule_rows()
        if as_json:
            self.stdout.write(json.dumps([{
                "workflow": r.schedule.workflow_name, "name": r.schedule.name,
                "expression": r.schedule.expression, "timezone": r.schedule.timezone,
                "catch_up": r.schedule.catch_up,
                "paused": bool(r.state and r.state.paused),
                "failing": _failing(r.state),
                "next": [s.isoformat() for s in r.next_fires],
                "next_problem": r.next_problem,
                "last_runs": [{"id": run.pk, "business_key": run.business_key,
                               "status": run.status} for run in r.last_runs],
            } for r in rows], indent=2))
            return
        if not rows:
            self.stdout.write("no schedules: no workflow declares one")
        for r in rows:
            paused = bool(r.state and r.state.paused)
            # A paused schedule has no next fire time (schedule_rows): said, as on the page.
            upcoming = [s.isoformat() for s in r.next_fires] + (
                [r.next_problem] if r.next_problem else []) or (
                ["none while paused"] if paused else [])
            self.stdout.write(f"{r.schedule.workflow_name} {r.schedule.name} "
                              f"[{r.schedule.expression} {r.schedule.timezone}, catch-up "
                              f"{r.schedule.catch_up}] {'paused' if paused else 'running'}; "
                              "next: " + ", ".join(upcoming))
            if (failing := _failing(r.state)) is not None:
                # The error was kept on one line (schedule_health.error_text): it cannot
                # forge a line of this listing or colour the terminal.
                self.stdout.write(f"  FAILING since {failing['since']}, {failing['failures']} "
                                  f"tick(s) in a row: {failing['last_error']}")


def _failing(state) -> dict | None:
    if state is None or state.failing_since is None:
        return None
    return {"since": state.failing_since.isoformat(), "failures": state.failures,
            "last_error": state.last_error}
