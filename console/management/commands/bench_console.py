"""Server time of the console's pages on a production-sized database (see seed_scale):
the runs list (plain, filtered, and searched by each thing a search matches), the attention
list and a run's detail, rendered through Django's full stack (middleware, permission
prefetch, templates) by the test client, as an operator. Each page is timed in interleaved
rounds, so a burst of load on the machine lands on every page alike; each line gives the
median, the 95th percentile and the page's number of queries."""

import statistics
import time

from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit.actions import AuditAction
from audit.chain import Actor, build_record
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Step

# The targets, in ms.
TARGETS = {"search": 50, "list": 100, "detail": 30}
AUDIT_RECORDS = 500
LONG_RUN_KEY = f"bench:audit-{AUDIT_RECORDS}"
COMPENSATION_REF = "CMP-bench-1"


class Command(BaseCommand):
    help = "Time the console's lists, search and run detail pages (median of --repeat)."

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=1_000_000,
                            help="how many runs seed_scale should make sure exist")
        parser.add_argument("--repeat", type=int, default=30)

    def handle(self, *args, runs, repeat, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench_console needs PostgreSQL (set DATABASE_URL=postgres://...)")
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        call_command("seed_scale", runs=runs, stdout=self.stdout)
        self.stdout.write(f"seeding checked in {time.perf_counter() - started:.1f}s")
        ensure_roles(Group, Permission)
        user, _ = User.objects.get_or_create(username="bench-operator")
        user.groups.add(Group.objects.get(name="operators"))
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)

        stuck = (Run.objects.filter(business_key__startswith="scale:",
                                    status=RunStatus.ATTENTION).order_by("pk").first())
        searched = Step.objects.get(run__business_key=f"scale:{max(1, runs * 7 // 9)}",
                                    position=3)
        long_run = self._run_with_long_audit_log(stuck)
        self._compensated_step(searched.run_id)
        self.stdout.write(f"{Run.objects.count()} runs in the database")
        pages = {
            "runs list": ("list", "/runs/"),
            "runs list, filtered": ("list", "/runs/?error_class=unknown&attention=on"),
            "attention list": ("list", "/attention/"),
            "run detail": ("detail", f"/runs/{stuck.pk}/"),
            f"run detail, {AUDIT_RECORDS} audit records": ("detail", f"/runs/{long_run.pk}/"),
            "search by business key": ("search", "/runs/?q=scale:9999"),
            "search by idempotency key": ("search", f"/runs/?q={searched.idempotency_key}"),
            "search by remote reference": ("search", f"/runs/?q={searched.remote_ref}"),
            "search by compensation reference": ("search", f"/runs/?q={COMPENSATION_REF}"),
            "search, nothing found": ("search", "/runs/?q=no-such-key"),
        }
        times = {name: [] for name in pages}
        queries = {}
        for i in range(repeat + 3):
            for name, (_, url) in pages.items():
                with CaptureQueriesContext(connection) as ctx:
                    t0 = time.perf_counter()
                    response = client.get(url)
                    elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise CommandError(f"{url} answered {response.status_code}")
                if i >= 3:  # the first rounds warm caches
                    times[name].append(elapsed)
                queries[name] = len(ctx)
        for name in pages:
            self._line(name, times[name], queries[name])
        searches = [t for name, (kind, _) in pages.items() if kind == "search"
                    for t in times[name]]
        self._line("search", searches)
        self.stdout.write("targets: median under {search} ms for a search, {list} ms for a "
                          "list, {detail} ms for a run's detail".format(**TARGETS))

    def _line(self, name, times, queries=None):
        p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
        extra = f", {queries} queries" if queries is not None else ""
        self.stdout.write(f"{name} median ms: {statistics.median(times):.1f} "
                          f"(p95 {p95:.1f}{extra})")

    def _run_with_long_audit_log(self, model: Run) -> Run:
        """A run shaped like `model` whose log holds AUDIT_RECORDS records: a step retried
        for days, as a flaky remote system makes one (made once, then kept)."""
        existing = Run.objects.filter(business_key=LONG_RUN_KEY).first()
        if existing is not None:
            return existing
        with transaction.atomic():
            run = Run.objects.get(pk=model.pk)
            steps = list(Step.objects.filter(run=run))
            run.pk, run.business_key, run.audit_seq, run.audit_head = None, LONG_RUN_KEY, 0, ""
            (run,) = Run.objects.bulk_create([run])
            for step in steps:
                step.pk, step.run = None, run
                step.idempotency_key = f"{LONG_RUN_KEY}:{step.name}"[:64]
            Step.objects.bulk_create(steps)
            records, actor = [], Actor.system("bench")
            for n in range(AUDIT_RECORDS):
                intent = n % 2 == 0
                record = build_record(
                    run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                    action=AuditAction.INTENT if intent else AuditAction.RETRY_SCHEDULED,
                    actor=actor, step_name=run.current_step or "step-7",
                    before={"step_status": "scheduled" if intent else "running"},
                    after={"step_status": "running" if intent else "scheduled"},
                    data={"attempt": n // 2 + 1} if intent else
                    {"error": "503 Service Unavailable", "delay_seconds": 60})
                records.append(record)
                run.audit_seq, run.audit_head = record.seq, record.hash
            AuditRecord.objects.bulk_create(records)
            Run.objects.filter(pk=run.pk).update(audit_seq=run.audit_seq,
                                                 audit_head=run.audit_head)
        return run

    def _compensated_step(self, run_id: int) -> None:
        # seed_scale compensates nothing; one step with a reference gives the search a hit.
        Step.objects.filter(run_id=run_id, position=3).update(compensation_ref=COMPENSATION_REF)
