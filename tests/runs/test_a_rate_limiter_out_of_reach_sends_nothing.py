"""A step of a rate-limited system whose rate limiter (Redis) cannot be asked is not sent: its
attempt ends as a transient failure naming the system and its limiter, retried by the step's
policy, and the run is let go of, not left held for the sweeper. Once Redis answers again
the step is sent, once. A Retry-After that cannot be shared after a call was made leaves the
call's outcome as it was. Redis out of reach is a real port: nothing listening on it, or a
listener that accepts and never answers."""

import logging
import socket

import pytest

from runs.execution import executor
from runs.machine import limits, transitions
from runs.machine.errors import Classified
from runs.models import ErrorClass, RunStatus, StepStatus
from tests.factories import make_due, new_run, step
from tests.receiver import ScriptedReceiver
from tests.silent_listener import silent_listener
from tests.workflows import limited_receiver

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    """A port of this machine nothing listens on: it refuses every connection."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def receiver(monkeypatch):
    with ScriptedReceiver() as server:
        monkeypatch.setattr(limited_receiver, "url", server.url)
        yield server


@pytest.fixture(params=["refused", "silent"])
def redis_out_of_reach(request, settings):
    """The limits' Redis URL pointing where no Redis answers; yields the reachable one."""
    reachable = settings.CELERY_BROKER_URL
    # Bounded as in production, shorter: the silent listener is waited on for this long.
    settings.BROKER_SOCKET_TIMEOUT = 0.5
    if request.param == "refused":
        settings.RUNS_LIMITS_REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/7"
        yield reachable
    else:
        with silent_listener() as port:
            settings.RUNS_LIMITS_REDIS_URL = f"redis://127.0.0.1:{port}/7"
            yield reachable


def test_a_step_whose_rate_limiter_is_out_of_reach_is_not_sent_and_retried(
        receiver, redis_out_of_reach, settings):
    run = new_run("test-rated", wake=False)
    status = executor.advance_run(run.pk, worker="w1")

    assert receiver.requests == []
    assert status == RunStatus.WAITING
    run.refresh_from_db()
    assert run.lease_owner == "" and run.next_wake_at is not None
    sent = step(run, "send")
    assert sent.status == StepStatus.SCHEDULED
    assert sent.error_class == ErrorClass.TRANSIENT
    assert "the rate limiter of system 'limited-receiver' could not be reached" \
        in sent.error_message
    assert "the call was not made" in sent.error_message

    settings.RUNS_LIMITS_REDIS_URL = redis_out_of_reach
    make_due(run)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert len(receiver.sent("POST", "/rated")) == 1
    assert step(run, "send").status == StepStatus.SUCCEEDED


def test_a_retry_after_that_cannot_be_shared_leaves_the_calls_outcome(settings, caplog):
    """Redis goes away while the call is out: the call happened, its outcome (a 429 with
    Retry-After) is returned as it came, and the lost block is said once."""
    limits.rate_limit("gone-after-admission", per_second=100)
    answered = transitions.Outcome(succeeded=False, error=Classified(
        ErrorClass.TRANSIENT, "HTTP 429", retry_after=2.0))

    def call():
        settings.RUNS_LIMITS_REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/7"
        return answered

    class Ctx:
        @staticmethod
        def heartbeat():
            return True

    try:
        with caplog.at_level(logging.WARNING, logger=limits.__name__):
            outcome = limits.call_within_limits(
                "gone-after-admission", Ctx, call,
                refused=lambda error: pytest.fail(f"the call was refused: {error}"))
    finally:
        limits.forget(system="gone-after-admission")
    assert outcome is answered
    warnings = [r for r in caplog.records if r.name == limits.__name__]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "'gone-after-admission'" in warnings[0].getMessage()
