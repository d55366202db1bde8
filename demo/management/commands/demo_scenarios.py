"""Put the demo's runs into every state an operator meets: completed, retrying, unknown
outcome, waiting for approval, compensation paused at a correction, compensation failed,
terminated, permanent error.

Each scenario queues its sandbox faults, starts its run without a wake-up hint and advances it
here, so the faults hit the run they are meant for. Needs the web server (the sandbox) up:
without it, it says so and makes nothing. The scenarios' business keys are fixed: run again
(each `make demo`), it finds them in place and adds nothing; a set an earlier try left
part-made is completed with the scenarios it lacks.
"""

import time
from collections.abc import Callable

from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from audit.redaction import redact_text
from demo.sandbox import faults
from runs.execution import executor
from runs.machine import retention, transitions
from runs.models import Run, RunStatus
from runs.operator.sandbox_check import sandbox_answers

SEED = Actor.system("demo_scenarios")
SEED_SECOND = Actor.system("demo_scenarios (second person)")
INVOICE = {"tenant": "tenant-42", "approver_email": "approver@example.com"}
# A run in these states is being worked (or is about to be) by some worker.
BUSY = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.COMPENSATING)
REST_WITHIN_SECONDS = 60
CUSTOMER = {"email": "linus@example.com", "name": "Linus", "plan": "enterprise"}


class Command(ValuesCutShortCommand):
    help = "Create one demo run in each state an operator meets (needs the sandbox up)."

    def handle(self, *args, **options):
        scenarios = self._scenarios()
        made = {(workflow, key): status for workflow, key, status in Run.objects.filter(
            business_key__in=[key for _, key, _ in scenarios],
        ).values_list("workflow_name", "business_key", "status")}
        # A scenario's run archived since it was made (bin/demo makes them at every start,
        # beat archives finished runs) is in place too: its key would refuse a new start.
        for workflow, key, _ in scenarios:
            if (workflow, key) not in made and (
                    tombstone := retention.archived_run(workflow, key)) is not None:
                made[workflow, key] = f"{tombstone.final_status}, archived"
        missing = [s for s in scenarios if s[:2] not in made]
        if not missing:
            self.stdout.write("  the demo's scenario runs are already in place")
            return
        # Without the sandbox every scenario's run ends in some other state (each step's call
        # fails to connect), and the faults queued for it are left for later real runs.
        problem = sandbox_answers(settings.SANDBOX_BASE_URL.rstrip("/"))
        if problem is not None:
            # SANDBOX_BASE_URL may carry a password (http://user:password@host/sandbox).
            raise CommandError(redact_text(
                f"the demo's sandbox does not answer at {settings.SANDBOX_BASE_URL}: {problem}."
                " Start the web server first, or point SANDBOX_BASE_URL at it; nothing was "
                "made"))
        for workflow, key, _ in scenarios:
            if (workflow, key) in made:
                # A set an earlier try left part-made: its runs stay as they are.
                self.stdout.write(f"  {key}: {made[workflow, key]} (already in place)")
        self._wait_for_other_runs_to_rest()
        for _, key, make in missing:
            # Each scenario's faults are for its own run: none is left over for the next.
            faults.clear()
            try:
                make()
            except Exception as exc:
                faults.clear()
                raise CommandError(redact_text(
                    f"scenario {key} stopped: {type(exc).__name__}: {exc}. The scenarios "
                    "before it are in place and its own run, if it started, is left as it "
                    "is; run demo_scenarios again to make the ones after it"
                )) from None

    def _scenarios(self) -> list[tuple[str, str, Callable[[], object]]]:
        """(workflow, business key, make it) of each scenario, in the order they are made:
        INV-RETRY last, so that no other scenario meets its faults (the worker retries it
        to the end after this command)."""
        tag = "demo"

        def key(number):
            return f"tenant-42:{number}-{tag}"

        def invoice(number):
            return self._start("invoice-approval", key(number),
                               {**INVOICE, "invoice_number": number})

        def approved(run):
            # As this command, never as the demo's approver: the audit trail names who
            # decided, and no person did.
            transitions.decide_approval(run.pk, step_name="approve-invoice", approved=True,
                                        actor=SEED, comment="looks right")
            return run

        def customer_ok():
            self._advance(self._start("customer-onboarding", f"tenant-9:cus-ok-{tag}",
                                      CUSTOMER))

        def permanent_error():
            faults.add("tracker.create", faults.FORBIDDEN)
            self._advance(invoice("INV-403"), "permanent error")

        def unknown_outcome():
            faults.add("payments.update", faults.COMMIT_THEN_TIMEOUT)
            # Every lookup by key fails (the runtime asks three times before a person).
            faults.add("payments.lookup", faults.UNAVAILABLE, times=3)
            self._advance(self._start("customer-onboarding", f"tenant-9:cus-unknown-{tag}",
                                      CUSTOMER), "unknown outcome", lookups=True)

        def waiting():
            self._advance(invoice("INV-WAIT"), "waiting for approval")

        def compensation_paused():
            run = self._advance(invoice("INV-COMP"))
            faults.add("ledger.post", faults.FORBIDDEN)
            self._advance(approved(run),
                          "compensation paused at the correction to the approver")

        def compensation_failed():
            run = self._advance(invoice("INV-CFAIL"))
            faults.add("ledger.post", faults.FORBIDDEN)
            faults.add("tracker.cancel", faults.FORBIDDEN)
            self._advance(approved(run))
            transitions.confirm_compensation(run.pk, step_name="notify-approver", actor=SEED,
                                             reason="correction checked")
            self._advance(run, "compensation failed")

        def terminated():
            run = self._advance(invoice("INV-TERM"))
            # The approver was notified (a high-impact effect): a second person agreed.
            transitions.terminate(run.pk, actor=SEED, reason="duplicate of INV-1847",
                                  approved_by=SEED_SECOND)
            self.stdout.write(f"  {run.business_key}: terminated")

        def retrying():
            faults.add("invoices.read", faults.UNAVAILABLE, times=3)
            self._advance(invoice("INV-RETRY"), "retrying (the worker finishes it)")

        return [
            ("customer-onboarding", f"tenant-9:cus-ok-{tag}", customer_ok),
            ("invoice-approval", key("INV-403"), permanent_error),
            ("customer-onboarding", f"tenant-9:cus-unknown-{tag}", unknown_outcome),
            ("invoice-approval", key("INV-WAIT"), waiting),
            ("invoice-approval", key("INV-COMP"), compensation_paused),
            ("invoice-approval", key("INV-CFAIL"), compensation_failed),
            ("invoice-approval", key("INV-TERM"), terminated),
            ("invoice-approval", key("INV-RETRY"), retrying),
        ]

    def _start(self, workflow, key, data) -> Run:
        return transitions.start_run(workflow=workflow, business_key=key, input=data,
                                     actor=SEED, wake=False)[0]

    def _wait_for_other_runs_to_rest(self) -> None:
        """The demo's worker is working the runs seed_demo started: a fault queued while one
        of them calls the sandbox would hit that run instead of its scenario's."""
        deadline = time.monotonic() + REST_WITHIN_SECONDS
        while Run.objects.filter(status__in=BUSY).exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    def _advance(self, run, label: str = "", *, lookups: bool = False) -> Run:
        """Advance the run here until it rests. A transition that wakes the run (an approval,
        a confirmed undo) may have the demo's worker take it first: then wait for the worker
        to let it go, so the next scenario step finds the run where it expects it."""
        deadline = time.monotonic() + REST_WITHIN_SECONDS
        while True:
            executor.advance_run(run.pk, worker="demo_scenarios")
            run.refresh_from_db()
            if lookups and run.status == RunStatus.WAITING and run.next_wake_at:
                # A failed lookup by key is asked again after a backoff: wait those out.
                time.sleep(max((run.next_wake_at - timezone.now()).total_seconds(), 0))
            elif run.status not in BUSY or time.monotonic() > deadline:
                break
            else:
                time.sleep(0.2)
        if label:
            self.stdout.write(f"  {run.business_key}: {run.status} ({label})")
        return run
