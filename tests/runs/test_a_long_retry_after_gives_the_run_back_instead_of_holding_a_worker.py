"""A remote system that answered Retry-After of half an hour is blocked for every worker. A
worker that then claims a run whose next step calls that system does not sit out the block holding
the run and itself (every worker would end up waiting so, and the runs of every other
workflow with them): the call is not made, the attempt ends as a transient failure whose
retry comes after the block, and the worker is free at once. A short block is still waited
out in place. A worker whose lease is lost while it waits for its turn makes no call."""

import pytest
import redis

from runs.execution import executor
from runs.machine import limits
from runs.models import ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.receiver import ScriptedReceiver
from tests.workflows import limited_receiver

pytestmark = pytest.mark.django_db

SYSTEM = "limited-receiver"


class Held(Exception):
    """The worker went on waiting far longer than any rate window."""


@pytest.fixture
def receiver(monkeypatch):
    with ScriptedReceiver() as server:
        monkeypatch.setattr(limited_receiver, "url", server.url)
        yield server


@pytest.fixture(params=["redis", "in-process"])
def windows(request, settings, monkeypatch):
    """The limiter's store (Redis, or the process's own without it), and a sleep that counts
    the seconds a worker waits, and stops a wait far longer than any rate window."""
    if request.param == "redis":
        settings.RUNS_LIMITS_REDIS_URL = settings.CELERY_BROKER_URL
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        client.delete(f"durable:block:{SYSTEM}", f"durable:rate:{SYSTEM}")
    else:
        settings.RUNS_LIMITS_REDIS_URL = ""
    slept = []
    real_sleep = limits.time.sleep

    def sleep(seconds):
        slept.append(seconds)
        if sum(slept) > 30:
            raise Held(f"still waiting for a turn after {sum(slept):.0f} s")
        real_sleep(seconds)

    monkeypatch.setattr(limits.time, "sleep", sleep)
    limits.forget(system=SYSTEM)
    limits.rate_limit(SYSTEM, per_second=5)
    yield slept
    if request.param == "redis":
        client.delete(f"durable:block:{SYSTEM}", f"durable:rate:{SYSTEM}")
    limits.forget(system=SYSTEM)
    limits.rate_limit(SYSTEM, per_second=5)


def test_a_run_meeting_a_long_block_is_given_back_with_its_retry_after_it(
        receiver, windows):
    # Well within the step's hour of retry budget (FAST): a block as long as the budget
    # spends it, and the run stops for a person (the retry budget's own rule).
    limits.honour_retry_after(SYSTEM, 1800)
    run = new_run("test-rated", wake=False)

    status = executor.advance_run(run.pk, worker="w1")

    assert receiver.sent("POST", "/rated") == []
    assert status == RunStatus.WAITING
    run.refresh_from_db()
    assert run.lease_owner == ""
    sent = step(run, "send")
    assert sent.status == StepStatus.SCHEDULED
    assert sent.error_class == ErrorClass.TRANSIENT
    assert "the call was not made" in sent.error_message
    assert f"{SYSTEM!r}" in sent.error_message
    # Not before the block ends: the retry is the block's, not the policy's short backoff.
    assert (sent.next_attempt_at - run.updated_at).total_seconds() >= 1700
    assert sum(windows) < limits.TURN_WAIT_LIMIT_SECONDS


def test_a_short_block_is_waited_out_and_the_call_made_once(receiver, windows):
    limits.honour_retry_after(SYSTEM, 2)
    run = new_run("test-rated", wake=False)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert len(receiver.sent("POST", "/rated")) == 1
    assert step(run, "send").attempt == 1


def test_a_worker_whose_lease_is_lost_while_it_waits_makes_no_call(windows, settings):
    limits.honour_retry_after(SYSTEM, 8)
    calls = []

    class Ctx:
        @staticmethod
        def heartbeat():
            return False  # another worker owns the run now

    outcome = limits.call_within_limits(SYSTEM, Ctx, lambda: calls.append(1),
                                        refused=lambda error: error)
    assert calls == []
    assert outcome.error_class == ErrorClass.TRANSIENT
    assert "lease" in outcome.message
