"""A wake-up hint the broker cannot take costs latency, not the run: the run is started and
the sweeper finds it. The outage is said in one line naming it, not as a traceback, which
would read as a failure of the command (start_run with the broker down, a real process
against a port nothing listens on)."""

import pytest

from runs.models import Run, RunStatus
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens there


def test_start_run_with_the_broker_down_starts_the_run_and_says_the_outage_in_one_line():
    starting = manage("start_run", "test-orders", "no-broker", "--input", '{"order": "o"}',
                      CELERY_BROKER_URL=NOWHERE)
    out, err = starting.communicate(timeout=120)
    assert starting.returncode == 0, err
    run = Run.objects.get(business_key="no-broker")
    assert run.status == RunStatus.QUEUED and f"started run {run.pk}" in out
    warnings = [line for line in err.splitlines() if "wake-up hint" in line]
    assert len(warnings) == 1
    assert f"wake-up hint for run {run.pk} not sent (" in warnings[0]
    assert "the sweeper will pick it up" in warnings[0]
    assert "Traceback" not in err
