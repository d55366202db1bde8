"""Server time of the console's pages on a production-sized database (see seed_scale):
the runs list, the attention list and a run's detail, rendered through Django's full stack
(middleware, permission prefetch, templates) by the test client, as an operator."""

import statistics
import time

from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.roles import ensure_roles
from runs.models import Run, RunStatus

TARGET_MS = 150


class Command(BaseCommand):
    help = "Time the runs list, attention list and run detail pages (median of 30)."

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
        total = Run.objects.count()
        pages = {"runs list": "/runs/", "attention list": "/attention/",
                 "run detail": f"/runs/{stuck.pk}/",
                 "runs list, filtered": "/runs/?error_class=unknown&attention=on"}
        self.stdout.write(f"{total} runs in the database")
        for name, url in pages.items():
            times, queries = [], 0
            for i in range(repeat + 3):
                with CaptureQueriesContext(connection) as ctx:
                    t0 = time.perf_counter()
                    response = client.get(url)
                    elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise CommandError(f"{url} answered {response.status_code}")
                if i >= 3:  # the first requests warm caches
                    times.append(elapsed)
                queries = len(ctx)
            median = statistics.median(times)
            p95 = sorted(times)[int(len(times) * 0.95) - 1]
            self.stdout.write(f"{name} median ms: {median:.1f} (p95 {p95:.1f}, "
                              f"{queries} queries)")
        self.stdout.write(f"target: median under {TARGET_MS} ms per page")
