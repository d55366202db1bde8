"""A read or a decision names the system it calls (`system=`), as a write does: the system's
rate limit and a Retry-After it gave hold the read too. Before, a read could not name one,
so a system that answered 429 to a write went on being read at full pace by every worker."""

import pytest
import redis

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.machine import limits
from runs.models import ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import FAST, Category, OrderIn, scripted_call

pytestmark = pytest.mark.django_db

SYSTEM = "read-limited-crm"
FLOW = "test-read-limited"
read_calls: list[str] = []


@pytest.fixture
def reads_a_limited_system(settings):
    settings.RUNS_LIMITS_REDIS_URL = settings.CELERY_BROKER_URL
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(f"durable:block:{SYSTEM}", f"durable:rate:{SYSTEM}")
    flow = Workflow(FLOW, version=1, input=OrderIn)

    @flow.read("look-up", retry=FAST, system=SYSTEM)
    def look_up(ctx):
        read_calls.append(ctx.key)
        return {"customer": "C-1"}

    @flow.decision("classify", schema=Category, retry=FAST, system=SYSTEM)
    def classify(ctx):
        return scripted_call(ctx, lambda: {"category": "office", "confidence": 0.9})

    limits.rate_limit(SYSTEM, per_second=5)
    read_calls.clear()
    yield flow
    registry.unregister(flow)
    limits.forget(system=SYSTEM)
    client.delete(f"durable:block:{SYSTEM}", f"durable:rate:{SYSTEM}")


def test_a_read_of_a_system_blocked_by_its_retry_after_is_not_made(reads_a_limited_system,
                                                                    script):
    limits.honour_retry_after(SYSTEM, 1800)
    run = new_run(FLOW, wake=False)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert read_calls == []
    looked = step(run, "look-up")
    assert looked.status == StepStatus.SCHEDULED
    assert looked.error_class == ErrorClass.TRANSIENT
    assert "the call was not made" in looked.error_message
    assert repr(SYSTEM) in looked.error_message


def test_once_the_system_takes_calls_again_the_read_and_the_decision_are_made(
        reads_a_limited_system, script):
    run = new_run(FLOW, wake=False)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED

    assert len(read_calls) == 1
    assert step(run, "classify").result["category"] == "office"


def test_a_step_declares_the_system_it_calls_whatever_its_kind(reads_a_limited_system):
    assert {s.name: s.system for s in reads_a_limited_system.steps} == {
        "look-up": SYSTEM, "classify": SYSTEM}
