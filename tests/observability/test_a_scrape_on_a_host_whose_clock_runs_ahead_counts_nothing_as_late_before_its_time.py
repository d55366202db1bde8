"""A scrape served by a host whose clock runs ten minutes ahead of the database's judges
leases, wake-up times and due times by the database's clock, which stamped them: a live
lease is not counted stuck, a run due in five minutes is not due (nor the sweeper's lag),
an approval request due in five minutes is not overdue. What is late by the database's clock
still is, by as much as it is."""

import json
from datetime import timedelta

import pytest

from approvals import requests
from approvals.models import ApprovalRequest
from runs import store
from runs.machine import transitions
from runs.models import Run, RunStatus
from tests.approvals.conftest import waiting_run
from tests.factories import new_run, place
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("durable_steps_stuck_past_lease", "durable_runs_due", "durable_sweeper_lag_seconds",
         "durable_approvals_overdue", "durable_approvals_pending")
SCRAPE = ("import json; from observability.metrics import RuntimeCollector; "
          f"names = {NAMES!r}; seen = {{}}\n"
          "for family in RuntimeCollector().collect():\n"
          "    for sample in family.samples:\n"
          "        if sample.name in names:\n"
          "            seen[sample.name] = seen.get(sample.name, 0) + sample.value\n"
          "print(json.dumps(seen))")


def _scraped_on_a_host_ten_minutes_ahead() -> dict:
    process = manage("shell", "-c", SCRAPE, RUNS_TEST_CLOCK_OFFSET_SECONDS=600)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_only_what_is_late_by_the_database_clock_is_counted_late():
    now = store.current().now()
    # Held by a live worker: its lease runs RUNS_LEASE_SECONDS from now.
    assert transitions.claim_run(new_run().pk, worker="host-a:1") is not None
    # Held by one that went silent: its lease ran out a minute ago.
    stuck = new_run()
    assert transitions.claim_run(stuck.pk, worker="host-b:2") is not None
    Run.objects.filter(pk=stuck.pk).update(lease_expires_at=now - timedelta(minutes=1))
    place(new_run(), status=RunStatus.WAITING, next_wake_at=now + timedelta(minutes=5))
    place(new_run(), status=RunStatus.WAITING, next_wake_at=now - timedelta(minutes=1))
    for due_in in (timedelta(minutes=5), -timedelta(minutes=1)):
        run = waiting_run()
        assert requests.open_pending_requests() == 1
        ApprovalRequest.objects.filter(run=run).update(due_at=now + due_in)

    seen = _scraped_on_a_host_ten_minutes_ahead()

    assert seen["durable_steps_stuck_past_lease"] == 1
    assert seen["durable_runs_due"] == 1
    assert seen["durable_approvals_pending"] == 2
    assert seen["durable_approvals_overdue"] == 1
    # The run due a minute ago is the oldest due, a minute and the scrape's start late by
    # the database's clock: never the ten minutes the host's clock adds.
    assert 60 <= seen["durable_sweeper_lag_seconds"] < 600
