"""Server time of the console's pages on a production-sized database (see seed_scale):
the runs list (plain, filtered, and searched by each thing a search matches), the attention
list and a run's detail, rendered through Django's full stack (middleware, permission
prefetch, templates) by the test client, as an operator; then Django admin's runs list and
its search, as a superuser. Each page is timed in interleaved
rounds, so a burst of load on the machine lands on every page alike; each line gives the
median, the 95th percentile and the page's number of queries.

Then the background work at the same size: one pass of the runs sweep and of the approvals
sweep with nothing due, one runs sweep pass after a mass worker death left LEASE_RUNS leases
expired, and a metrics scrape."""

import statistics
import time
from datetime import timedelta

from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import schedule as approvals_schedule
from approvals.bulk import bulk_preview
from audit.actions import AuditAction
from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor, build_record
from audit.head_seals import seal_head
from audit.models import AuditRecord
from console.roles import ensure_roles
from observability.metrics import recount_history
from runs import store
from runs.bench_processes import ensure_database, vacuum_if_autovacuum_is_off
from runs.execution import sweeper
from runs.machine.storable import whole_number_argument, whole_number_in_range
from runs.management.commands.seed_scale import MOST_RUNS
from runs.models import Run, RunStatus, Step, StepStatus, Worker
from runs.reads.selectors import RunFilters

# The targets, in ms.
TARGETS = {"search": 50, "list": 100, "detail": 30}
BACKGROUND_TARGETS = {"sweep": 10, "sweep_due": 1000, "metrics": 50, "bulk_preview": 500}
BULK_RUNS = 100_000
LEASE_RUNS = 500
LEASE_KEY = "bench:lease-"
AUDIT_RECORDS = 500
LONG_RUN_KEY = f"bench:audit-{AUDIT_RECORDS}"
COMPENSATION_REF = "CMP-bench-1"
BENCH_WORKERS = 16
# Each round renders every page once (a second or so at full scale): ten thousand is a day.
MOST_REPEAT = 10_000


class Command(ValuesCutShortCommand):
    help = "Time the console's lists, search and run detail pages (median of --repeat)."
    # The database may not exist yet (a new machine): no system check may touch it before
    # handle() creates it.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=whole_number_argument, default=1_000_000,
                            help="how many runs seed_scale should make sure exist")
        parser.add_argument("--repeat", type=whole_number_argument, default=30,
                            help=f"timed rounds of each page (1 to {MOST_REPEAT})")

    def handle(self, *args, runs, repeat, **options):
        # Checked before anything is written: the bulk preview reads the BULK_RUNS-th newest
        # run, and the medians need one timed round.
        whole_number_in_range(runs, option="--runs", low=BULK_RUNS, high=MOST_RUNS,
                              then=f"the bulk preview times {BULK_RUNS} runs; nothing was "
                                   "done")
        whole_number_in_range(repeat, option="--repeat", low=1, high=MOST_REPEAT,
                              then="nothing was done")
        if store.current().name != "postgresql":
            raise CommandError("bench_console needs PostgreSQL (set DATABASE_URL=postgres://...)")
        ensure_database(self.stdout)
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        call_command("seed_scale", runs=runs, stdout=self.stdout)
        self.stdout.write(f"seeding checked in {time.perf_counter() - started:.1f}s")
        vacuum_if_autovacuum_is_off(self.stdout)
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
        self._register_workers()
        self.stdout.write(f"{Run.objects.count()} runs in the database")
        pages = {
            "runs list": ("list", "/runs/"),
            "runs list, filtered": ("list", "/runs/?error_class=unknown&attention=on"),
            "runs list, sorted by created": ("list", "/runs/?sort=-created"),
            "runs list, last 24 h": ("list", "/runs/?period=24h"),
            # No index may name current_step (a step's checkpoint stays HOT): this order is
            # a sort of the runs found.
            "runs list, sorted by current step": ("list", "/runs/?sort=step"),
            "workers page": ("list", "/workers/"),
            "attention list": ("list", "/attention/"),
            "run detail": ("detail", f"/runs/{stuck.pk}/"),
            f"run detail, {AUDIT_RECORDS} audit records": ("detail", f"/runs/{long_run.pk}/"),
            "search by business key": ("search", "/runs/?q=scale:9999"),
            "search by idempotency key": ("search", f"/runs/?q={searched.idempotency_key}"),
            "search by key prefix": ("search", f"/runs/?q={searched.idempotency_key[:12]}"),
            # The end of a business key, as people type it without its prefix.
            "search by business key suffix": (
                "search", f"/runs/?q={searched.run.business_key.rpartition(':')[2]}"),
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
        self._admin(searched, repeat)
        self._bulk_preview(user, repeat)
        self._background(client, stuck, repeat)

    def _admin(self, searched: Step, repeat: int) -> None:
        """Django admin's runs changelist, plain and searched (by the start of a business
        key and by an idempotency key, through the console's search), as a superuser."""
        admin, _ = User.objects.get_or_create(username="bench-admin", defaults={
            "is_staff": True, "is_superuser": True})
        client = Client(HTTP_HOST="localhost")
        client.force_login(admin)
        pages = {"admin runs list": ["/admin/runs/run/"],
                 "admin search": ["/admin/runs/run/?q=scale:9999",
                                  f"/admin/runs/run/?q={searched.idempotency_key}"]}
        times = {name: [] for name in pages}
        queries = {}
        for i in range(repeat + 3):
            for name, urls in pages.items():
                for url in urls:
                    with CaptureQueriesContext(connection) as ctx:
                        t0 = time.perf_counter()
                        response = client.get(url)
                        elapsed = (time.perf_counter() - t0) * 1000
                    if response.status_code != 200:
                        raise CommandError(f"{url} answered {response.status_code}")
                    if i >= 3:
                        times[name].append(elapsed)
                    queries[name] = len(ctx)
        for name in pages:
            self._line(name, times[name], queries[name])
        self.stdout.write("targets: median under {list} ms for the admin's runs list and "
                          "its search".format(**TARGETS))

    def _bulk_preview(self, user, repeat: int) -> None:
        """The preview of a bulk action over the newest BULK_RUNS runs (a time range on
        created, as an operator sets it on the list): the count, how many the operator may
        act on, how many the action accepts."""
        since = (Run.objects.order_by("-created_at").values_list("created_at", flat=True)
                 [BULK_RUNS - 1])
        filters = RunFilters(time_field="created", since=since)
        times = []
        for i in range(repeat + 3):
            t0 = time.perf_counter()
            preview = bulk_preview("terminate", filters, user=user)
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1000)
        self._line("bulk preview 100k runs", times)
        self.stdout.write(f"  ({preview.matching} runs matched: created since "
                          f"{since:%Y-%m-%d %H:%M}; target: median under "
                          f"{BACKGROUND_TARGETS['bulk_preview']} ms)")

    def _background(self, client, model: Run, repeat: int) -> None:
        held = self._lease_runs(model)
        self._release(held)  # nothing due: the lease runs sit completed
        times = []
        for _ in range(repeat + 3):
            t0 = time.perf_counter()
            report = sweeper.sweep()
            times.append((time.perf_counter() - t0) * 1000)
        self._line("runs sweep", times[3:])
        if report.expired or report.due or report.requeued:
            self.stdout.write(f"  (that pass was not idle: {report})")
        times = []
        for _ in range(repeat + 3):
            t0 = time.perf_counter()
            approvals = approvals_schedule.sweep()
            times.append((time.perf_counter() - t0) * 1000)
        self._line("approvals sweep", times[3:])
        if any(approvals.as_dict().values()):
            self.stdout.write(f"  (that pass was not idle: {approvals})")
        times = []
        for _ in range(5):
            self._expire(held)
            t0 = time.perf_counter()
            report = sweeper.sweep()
            times.append((time.perf_counter() - t0) * 1000)
            if report.expired != LEASE_RUNS:
                raise CommandError(f"the sweep took back {report.expired} of {LEASE_RUNS} "
                                   "expired leases")
            self._release(held)
        self._line(f"runs sweep {LEASE_RUNS} due", times)
        times = []
        for i in range(repeat + 3):
            t0 = time.perf_counter()
            response = client.get("/metrics")
            elapsed = (time.perf_counter() - t0) * 1000
            if response.status_code != 200 or b"durable_metrics_up 1.0" not in response.content:
                raise CommandError(f"/metrics answered {response.status_code}")
            if i >= 3:
                times.append(elapsed)
        self._line("metrics", times)
        # What one scrape in METRICS_FINISHED_RECOUNT_SECONDS (per web process) costs.
        times = []
        for _ in range(3):
            recount_history()
            t0 = time.perf_counter()
            client.get("/metrics")
            times.append((time.perf_counter() - t0) * 1000)
        self._line("metrics, recounting history", times)
        self.stdout.write("targets: median under {sweep} ms for a sweep with nothing due, "
                          "{sweep_due} ms for the runs sweep with {n} expired leases, "
                          "{metrics} ms for a metrics scrape".format(n=LEASE_RUNS,
                                                                    **BACKGROUND_TARGETS))

    def _line(self, name, times, queries=None):
        p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
        extra = f", {queries} queries" if queries is not None else ""
        self.stdout.write(f"{name} median ms: {statistics.median(times):.1f} "
                          f"(p95 {p95:.1f}{extra})")

    def _register_workers(self) -> None:
        """A fleet's worth of worker rows for the workers page (a registry holds one row
        per process seen lately, whatever the number of runs)."""
        for i in range(BENCH_WORKERS):
            Worker.objects.update_or_create(name=f"bench-worker:{i}", defaults={
                "host": "bench-worker", "pid": i, "queues": "celery",
                "started_at": timezone.now(), "heartbeat_at": timezone.now()})

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
            run.audit_seal = None
            (run,) = Run.objects.bulk_create([run])
            for step in steps:
                step.pk, step.run = None, run
                step.idempotency_key = f"{LONG_RUN_KEY}:{step.name}"[:64]
            Step.objects.bulk_create(steps)
            records, actor = [], Actor.system("bench")
            for n in range(AUDIT_RECORDS):
                # One record per attempt, carrying its intent (the step's row held it).
                record = build_record(
                    run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                    action=AuditAction.RETRY_SCHEDULED,
                    actor=actor, step_name=run.current_step or "step-7",
                    before={"step_status": "running"}, after={"step_status": "scheduled"},
                    data={"attempt": n + 1, "key": steps[0].idempotency_key,
                          "started_at": run.created_at.isoformat(),
                          "error": "503 Service Unavailable", "delay_seconds": 60})
                records.append(record)
                run.audit_seq, run.audit_head = record.seq, record.hash
            AuditRecord.objects.bulk_create(records)
            # Sealed as the runtime seals a head, or verify_audit would name this run.
            Run.objects.filter(pk=run.pk).update(
                audit_seq=run.audit_seq, audit_head=run.audit_head,
                audit_seal=seal_head(run.pk, run.audit_seq, run.audit_head))
        return run

    def _compensated_step(self, run_id: int) -> None:
        # seed_scale compensates nothing; one step with a reference gives the search a hit.
        Step.objects.filter(run_id=run_id, position=3).update(compensation_ref=COMPENSATION_REF)

    def _lease_runs(self, model: Run) -> list[int]:
        """LEASE_RUNS runs shaped like `model` for the lease-expiry pass (made once)."""
        have = Run.objects.filter(business_key__startswith=LEASE_KEY).count()
        if have < LEASE_RUNS:
            with transaction.atomic():
                run = Run.objects.get(pk=model.pk)
                steps = list(Step.objects.filter(run=run))
                runs = []
                for n in range(have, LEASE_RUNS):
                    copy = Run(**{f.attname: getattr(run, f.attname)
                                  for f in Run._meta.concrete_fields if not f.primary_key})
                    copy.business_key, copy.audit_seq, copy.audit_head = f"{LEASE_KEY}{n}", 0, ""
                    copy.audit_seal = None
                    runs.append(copy)
                runs = Run.objects.bulk_create(runs)
                Step.objects.bulk_create([
                    Step(**{**{f.attname: getattr(step, f.attname)
                               for f in Step._meta.concrete_fields if not f.primary_key},
                            "run_id": copy.pk,
                            "idempotency_key": f"{copy.business_key}:{step.name}"[:64]})
                    for copy in runs for step in steps])
        return list(Run.objects.filter(business_key__startswith=LEASE_KEY)
                    .values_list("pk", flat=True))

    def _expire(self, ids: list[int]) -> None:
        """Put the runs where a mass worker death leaves them: running, the fourth step in
        flight, the lease expired a minute ago."""
        now = timezone.now()
        ago = now - timedelta(minutes=1)
        Run.objects.filter(pk__in=ids).update(
            status=RunStatus.RUNNING, attention_reason="", current_step="step-4",
            lease_owner="bench-dead-worker", lease_expires_at=ago, heartbeat_at=ago,
            next_wake_at=None, updated_at=ago, finished_at=None)
        steps = Step.objects.filter(run_id__in=ids)
        steps.filter(position__lt=3).update(status=StepStatus.SUCCEEDED)
        steps.filter(position=3).update(status=StepStatus.RUNNING, error_class="",
                                        error_message="", lease_owner="bench-dead-worker",
                                        lease_expires_at=ago)
        steps.filter(position__gt=3).update(status=StepStatus.PENDING)

    def _release(self, ids: list[int]) -> None:
        """Put the runs back to completed, so that they are not due for anything."""
        now = timezone.now() - timedelta(days=30)
        Run.objects.filter(pk__in=ids).update(
            status=RunStatus.COMPLETED, current_step="", lease_owner="", lease_expires_at=None,
            next_wake_at=None, updated_at=now, finished_at=now)
        Step.objects.filter(run_id__in=ids).update(
            status=StepStatus.SUCCEEDED, error_class="", error_message="", lease_owner="",
            lease_expires_at=None)
