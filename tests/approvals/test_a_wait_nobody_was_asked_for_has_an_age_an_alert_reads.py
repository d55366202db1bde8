"""The approvals sweep asks for each wait within a pass. A wait nobody has been asked for
past that (the sweep not running, a wait it can never ask, a request that keeps failing to
open) shows in a gauge an alert reads, durable_approval_waits_unasked_oldest_seconds, where
it was in the sweep's log only; a wait whose request is open counts in it no more."""

from datetime import timedelta

import pytest

from approvals import requests
from observability.metrics import registry
from runs.models import ApprovalWait
from tests.approvals.conftest import waiting_run

pytestmark = pytest.mark.django_db
GAUGE = "durable_approval_waits_unasked_oldest_seconds"


def _gauge() -> float:
    return registry.get_sample_value(GAUGE)


def test_a_wait_nobody_was_asked_for_ages_until_its_request_opens(approvers):
    assert _gauge() == 0
    run = waiting_run()
    # Written an hour ago, and not asked for since (no sweep ran).
    ApprovalWait.objects.filter(run=run).update(
        created_at=ApprovalWait.objects.get(run=run).created_at - timedelta(hours=1))
    assert _gauge() == pytest.approx(3600, abs=60)

    assert requests.open_pending_requests() == 1
    assert _gauge() == 0
