"""The run page says when a step has the stop verdict and why the run waits before its
attempt, next to the approval request it waits on."""

import pytest
from django.urls import reverse

from approvals import requests
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_a_run_waiting_before_a_stop_verdict_attempt_shows_the_verdict_and_why(
        client_for, operator, settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    run = new_run("test-stop-verdict")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert requests.open_pending_requests() == 1

    body = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "verdict: stop, a person approves each attempt" in body
    assert "pay-unkeyed waits for a person before attempt 1" in body
    assert "has no reconcile function and its receiver ignores keys" in body
    assert "pay-unkeyed (request #" in body
