"""A broker that accepts connections and never answers (hung, failing over, a half-open
connection behind a firewall) costs a caller seconds, not the request: the run is started,
the wake-up hint is given up within the broker's socket timeout and the sweeper sends it
later. Without a timeout the publish waits forever, and so would a web request or a
decision (a real process, against a listener of this test's that never says a word)."""

import pytest

from runs.models import Run, RunStatus
from tests.processes import manage
from tests.silent_listener import silent_listener

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def silent_broker():
    with silent_listener() as port:
        yield f"redis://127.0.0.1:{port}/0"


def test_start_run_against_a_silent_broker_stores_the_run_and_returns_within_seconds(
        silent_broker):
    starting = manage("start_run", "test-orders", "silent-broker", "--input",
                      '{"order": "o"}', CELERY_BROKER_URL=silent_broker)
    try:
        out, err = starting.communicate(timeout=40)
    finally:
        if starting.poll() is None:
            starting.kill()
            starting.communicate()
    assert starting.returncode == 0, err
    run = Run.objects.get(business_key="silent-broker")
    assert run.status == RunStatus.QUEUED and f"started run {run.pk}" in out
    warnings = [line for line in err.splitlines() if "wake-up hint" in line]
    assert len(warnings) == 1 and "the sweeper will pick it up" in warnings[0]
