"""The workers page shows each worker process as its own heartbeats describe it (host,
process, queues, since when, last heartbeat), the runs it holds now, and marks a worker
silent once it has not beaten for longer than a lease: a real Celery worker registers
itself, and after a SIGKILL it is marked silent while its leased run still names it."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.models import RunStatus, Worker
from tests.factories import new_run, place
from tests.processes import kill_hard, start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


def _slug(name: str) -> str:
    """The anchor of a worker's row (Django's slugify of its name)."""
    return re.sub(r"[^\w\s-]", "", name.lower())


def _row(body: str, name: str) -> str:
    slug = _slug(name)
    found = re.search(rf'<tr id="worker-{re.escape(slug)}".*?</tr>', body, re.S)
    assert found, f"no row for {name}"
    return found.group(0)


def test_a_worker_registers_holds_runs_and_is_marked_silent_after_a_kill(
        client_for, operator, tmp_path, settings):
    settings.RUNS_LEASE_SECONDS = LEASE
    week_ago = timezone.now() - timedelta(days=8)
    Worker.objects.create(name="long-gone:7", host="long-gone", pid=7, started_at=week_ago,
                          heartbeat_at=week_ago)
    process = start_worker("registry", tmp_path, WORKER_HEARTBEAT_SECONDS=0.3,
                           RUNS_LEASE_SECONDS=LEASE)
    try:
        worker = wait_for(lambda: Worker.objects.filter(pid=process.pid).first(),
                          what="the worker's first heartbeat")
        # A starting worker drops the rows of processes gone for more than a week.
        assert not Worker.objects.filter(name="long-gone:7").exists()
        first = worker.heartbeat_at
        wait_for(lambda: Worker.objects.get(pk=worker.pk).heartbeat_at > first,
                 what="a second heartbeat")
        assert worker.name.endswith(f":{process.pid}") and "celery" in worker.queues
        # Placed runs, started without a wake-up hint: the live worker would claim one
        # before it is placed, and its checkpoint would write its own lease back.
        run = place(new_run(wake=False), status=RunStatus.RUNNING, lease_owner=worker.name,
                    lease_expires_at=timezone.now() + timedelta(minutes=5))
        # A lease held by a process that never registered still shows.
        ghost = place(new_run(wake=False), status=RunStatus.RUNNING, lease_owner="elsewhere:4242",
                      lease_expires_at=timezone.now() - timedelta(seconds=1))
        done = place(new_run(wake=False), status=RunStatus.COMPLETED, lease_owner=worker.name)
        client = client_for(operator)

        body = client.get(reverse("console:workers")).content.decode()
        row = _row(body, worker.name)
        assert "alive" in row and f"#{run.pk}<" in row and f"#{done.pk}<" not in row
        assert str(process.pid) in row and "celery" in row
        ghost_row = _row(body, "elsewhere:4242")
        assert "unregistered" in ghost_row and f"#{ghost.pk}<" in ghost_row
        assert "1 past the lease" in ghost_row
        # The run's page links the worker that holds it.
        page = client.get(reverse("console:run", args=[run.pk])).content.decode()
        assert (f'href="{reverse("console:workers")}#worker-'
                f'{_slug(worker.name)}"') in page

        kill_hard(process)
        killed_at = Worker.objects.get(pk=worker.pk).heartbeat_at
        wait_for(lambda: timezone.now() > killed_at + timedelta(seconds=LEASE + 0.5),
                 timeout=10, what="a lease to pass")
        assert Worker.objects.get(pk=worker.pk).heartbeat_at == killed_at  # nobody beats
        row = _row(client.get(reverse("console:workers")).content.decode(), worker.name)
        assert "silent" in row and "alive" not in row and f"#{run.pk}<" in row
    finally:
        kill_hard(process)


def test_a_worker_that_stops_cleanly_says_so(client_for, operator, tmp_path):
    process = start_worker("leaving", tmp_path, WORKER_HEARTBEAT_SECONDS=0.3)
    try:
        worker = wait_for(lambda: Worker.objects.filter(pid=process.pid).first(),
                          what="the worker's first heartbeat")
        stop(process)
        process.wait(timeout=30)
        worker = wait_for(lambda: Worker.objects.filter(pk=worker.pk,
                                                        stopped_at__isnull=False).first(),
                          what="the worker's last word")
        row = _row(client_for(operator).get(reverse("console:workers")).content.decode(),
                   worker.name)
        assert "stopped" in row and "silent" not in row
    finally:
        kill_hard(process)


def test_the_workers_page_needs_the_view_permission_and_costs_two_queries(
        client_for, django_user_model, operator):
    nobody = django_user_model.objects.create_user("nobody", password="pw")
    assert client_for(nobody).get(reverse("console:workers")).status_code == 403
    client = client_for(operator)
    for i in range(5):
        Worker.objects.create(name=f"h:{i}", host="h", pid=i, started_at=timezone.now(),
                              heartbeat_at=timezone.now())
        place(new_run(), status=RunStatus.RUNNING, lease_owner=f"h:{i}")
    client.get(reverse("console:workers"))
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("console:workers"))
    for i in range(5, 25):
        Worker.objects.create(name=f"h:{i}", host="h", pid=i, started_at=timezone.now(),
                              heartbeat_at=timezone.now())
        place(new_run(), status=RunStatus.RUNNING, lease_owner=f"h:{i}")
    with CaptureQueriesContext(connection) as many:
        body = client.get(reverse("console:workers")).content.decode()
    assert len(many) == len(few)
    assert body.count('class="badge s-succeeded">alive') == 25


def test_a_worker_busy_with_a_long_step_is_alive_while_it_renews_the_lease(
        client_for, operator):
    """A worker beats on the thread that runs its tasks: during a long step only the step's
    lease renewals say it is alive."""
    long_ago = timezone.now() - timedelta(minutes=10)
    busy = Worker.objects.create(name="busy:1", host="busy", pid=1, started_at=long_ago,
                                 heartbeat_at=long_ago)
    gone = Worker.objects.create(name="gone:2", host="gone", pid=2, started_at=long_ago,
                                 heartbeat_at=long_ago)
    place(new_run(), status=RunStatus.RUNNING, lease_owner=busy.name,
          heartbeat_at=timezone.now(), lease_expires_at=timezone.now() + timedelta(seconds=30))
    place(new_run(), status=RunStatus.RUNNING, lease_owner=gone.name, heartbeat_at=long_ago,
          lease_expires_at=long_ago)
    body = client_for(operator).get(reverse("console:workers")).content.decode()
    assert "alive" in _row(body, busy.name) and "silent" not in _row(body, busy.name)
    assert "silent" in _row(body, gone.name) and "1 past the lease" in _row(body, gone.name)
