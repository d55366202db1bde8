"""The workers page judges beats and leases by the database's clock, which wrote them, not
by the web host's: drawn on a host ten minutes ahead it shows a worker that beat just now
alive, with its lease running, and one silent for two minutes silent; drawn on a host ten
minutes behind, the silent one is still shown silent, its lease run out."""

import json
from datetime import timedelta

import pytest

from runs import store
from runs.machine import transitions
from runs.models import Run
from runs.worker_models import Worker
from tests.factories import new_run
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

TEN_MINUTES = 600
DRAW = ("import json; from runs.reads.workers import workers_page; "
        "print(json.dumps(sorted([w.name, w.silent, w.held_count, w.expired] "
        "for w in workers_page(workflow_ids=None).workers)))")


def _drawn_on_a_host_off_by(seconds: int) -> list:
    process = manage("shell", "-c", DRAW, RUNS_TEST_CLOCK_OFFSET_SECONDS=seconds)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def live_and_silent():
    """host-a beat and took its lease just now; host-b did both two minutes ago, by the
    database's clock."""
    for name in ("host-a:1", "host-b:2"):
        assert transitions.claim_run(new_run().pk, worker=name) is not None
        Worker.objects.create(name=name, host=name[:6], pid=int(name[-1]),
                              started_at=store.current().now(),
                              heartbeat_at=store.current().now())
    ago = store.current().now() - timedelta(minutes=2)
    Worker.objects.filter(name="host-b:2").update(heartbeat_at=ago)
    Run.objects.filter(lease_owner="host-b:2").update(
        heartbeat_at=ago, lease_expires_at=ago + timedelta(seconds=30))


def test_a_host_ten_minutes_ahead_shows_the_live_worker_alive_and_its_lease_running(
        live_and_silent):
    assert _drawn_on_a_host_off_by(TEN_MINUTES) == [["host-a:1", False, 1, 0],
                                                     ["host-b:2", True, 1, 1]]


def test_a_host_ten_minutes_behind_shows_the_silent_worker_silent_and_its_lease_run_out(
        live_and_silent):
    assert _drawn_on_a_host_off_by(-TEN_MINUTES) == [["host-a:1", False, 1, 0],
                                                      ["host-b:2", True, 1, 1]]
