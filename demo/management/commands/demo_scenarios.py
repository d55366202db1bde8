"""Put the demo's runs into every state an operator meets: completed, retrying, unknown
outcome, waiting for approval, compensation paused at a correction, compensation failed,
terminated, permanent error.

Each scenario queues its sandbox faults, starts its run without a wake-up hint and advances it
here, so the faults hit the run they are meant for. Needs the web server (the sandbox) up.
The scenarios' business keys are fixed: run again (each `make demo`), it finds them in place
and adds nothing.
"""

import time

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.utils import timezone

from audit.chain import Actor
from demo.sandbox import faults
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus

SEED = Actor.system("demo_scenarios")
SEED_SECOND = Actor.system("demo_scenarios (second person)")
INVOICE = {"tenant": "tenant-42", "approver_email": "approver@example.com"}
CUSTOMER = {"email": "linus@example.com", "name": "Linus", "plan": "enterprise"}


class Command(BaseCommand):
    help = "Create one demo run in each state an operator meets (needs the sandbox up)."

    def handle(self, *args, **options):
        tag = "demo"
        first = f"tenant-9:cus-ok-{tag}"
        if Run.objects.filter(workflow_name="customer-onboarding", business_key=first).exists():
            self.stdout.write("  the demo's scenario runs are already in place")
            return
        approver = User.objects.filter(username="approver").first()
        approve_as = Actor.for_user(approver) if approver else SEED

        def invoice(number):
            return self._start("invoice-approval", f"tenant-42:{number}-{tag}",
                               {**INVOICE, "invoice_number": number})

        def approved(run):
            transitions.decide_approval(run.pk, step_name="approve-invoice", approved=True,
                                        actor=approve_as, comment="looks right")
            return run

        faults.clear()
        self._advance(self._start("customer-onboarding", first, CUSTOMER))
        faults.add("tracker.create", faults.FORBIDDEN)
        self._advance(invoice("INV-403"), "permanent error")
        faults.add("payments.update", faults.COMMIT_THEN_TIMEOUT)
        # Every lookup by key fails (the runtime asks three times before a person).
        faults.add("payments.lookup", faults.UNAVAILABLE, times=3)
        self._advance(self._start("customer-onboarding", f"tenant-9:cus-unknown-{tag}",
                                  CUSTOMER), "unknown outcome", lookups=True)
        self._advance(invoice("INV-WAIT"), "waiting for approval")
        run = self._advance(invoice("INV-COMP"))
        faults.add("ledger.post", faults.FORBIDDEN)
        self._advance(approved(run), "compensation paused at the correction to the approver")
        run = self._advance(invoice("INV-CFAIL"))
        faults.add("ledger.post", faults.FORBIDDEN)
        faults.add("tracker.cancel", faults.FORBIDDEN)
        self._advance(approved(run))
        transitions.confirm_compensation(run.pk, step_name="notify-approver", actor=SEED,
                                         reason="correction checked")
        self._advance(run, "compensation failed")
        run = self._advance(invoice("INV-TERM"))
        # The approver was notified (a high-impact effect): a second person agreed.
        transitions.terminate(run.pk, actor=SEED, reason="duplicate of INV-1847",
                              approved_by=SEED_SECOND)
        self.stdout.write(f"  {run.business_key}: terminated")
        faults.clear()
        # Last, so that no other scenario meets its faults: the worker retries it to the end.
        faults.add("invoices.read", faults.UNAVAILABLE, times=3)
        self._advance(invoice("INV-RETRY"), "retrying (the worker finishes it)")

    def _start(self, workflow, key, data) -> Run:
        return transitions.start_run(workflow=workflow, business_key=key, input=data,
                                     actor=SEED, wake=False)[0]

    def _advance(self, run, label: str = "", *, lookups: bool = False) -> Run:
        executor.advance_run(run.pk, worker="demo_scenarios")
        run.refresh_from_db()
        # A failed lookup by key is asked again after a backoff: wait those out.
        while lookups and run.status == RunStatus.WAITING and run.next_wake_at:
            time.sleep(max((run.next_wake_at - timezone.now()).total_seconds(), 0))
            executor.advance_run(run.pk, worker="demo_scenarios")
            run.refresh_from_db()
        if label:
            self.stdout.write(f"  {run.business_key}: {run.status} ({label})")
        return run
