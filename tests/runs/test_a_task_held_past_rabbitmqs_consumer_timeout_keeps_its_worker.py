"""RabbitMQ closes the channel of a consumer that holds a message unacknowledged past its
consumer_timeout (30 minutes by default). Our tasks are acknowledged late, and one
advance_run may rightly run longer (a run of many steps, a step that heartbeats). Celery
called the closed channel an unrecoverable error and the worker shut down once its task
ended: one long run stopped a worker for good, unless something restarted it. Now
(CELERY_BROKER_CHANNEL_ERROR_RETRY) the worker connects again and takes new work; the long
step completes once, and the copy of its message the broker hands out again is refused by
the run's lease (a real prefork worker on a RabbitMQ node of the test's own whose
consumer_timeout is two seconds)."""

from collections import Counter

import pytest
from django.core.management import call_command
from kombu import pools

from audit.chain import Actor
from console.celery import app as celery_app
from demo.sandbox import faults
from demo.sandbox.models import Customer, Message
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step
from tests.own_rabbitmq import rabbitmq_node
from tests.processes import start_worker, stop, until_status, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
HOLD = 8  # the customer system's answer to the first create: past the consumer timeout


def _publish_to(url: str) -> None:
    """This process's wake-up hints go to `url` from now on: Celery keeps its connections
    and producers for the URL it first connected to, in kombu's pools of the process, one
    per URL. Those are closed and forgotten together: a pool closed but kept would be handed
    to the next test that sends a message to its URL ("Acquire on closed pool")."""
    pools.reset()
    celery_app._pool = celery_app.amqp._producer_pool = None
    celery_app.conf.broker_url = url


@pytest.fixture
def broker_with_a_short_consumer_timeout(tmp_path, settings, monkeypatch):
    with rabbitmq_node(tmp_path / "rabbitmq", consumer_timeout_ms=2000) as url:
        before = celery_app.conf.broker_url
        monkeypatch.setenv("CELERY_BROKER_URL", url)
        settings.CELERY_BROKER_URL = url
        _publish_to(url)
        try:
            yield url
        finally:
            _publish_to(before)


def _onboard(key: str) -> Run:
    return start_run(workflow="customer-onboarding", business_key=key,
                     input={"email": f"{key}@example.com", "name": key, "plan": "pro"},
                     actor=Actor.system("consumer-timeout-test"))[0]


def test_a_worker_whose_channel_rabbitmq_closes_mid_task_goes_on_taking_work(
        tmp_path, settings, live_sandbox, broker_with_a_short_consumer_timeout):
    settings.SANDBOX_HOLD_SECONDS = HOLD
    settings.EXTERNAL_TIMEOUT_SECONDS = HOLD + 10  # slow, not lost
    faults.add("customers.create", faults.SLOW)
    log = tmp_path / "long.log"
    worker = start_worker("long", tmp_path, pool="prefork", concurrency=2,
                          CELERY_BROKER_URL=broker_with_a_short_consumer_timeout,
                          RUNS_LEASE_SECONDS=HOLD * 4)
    try:
        slow = _onboard("held-long")
        wait_for(lambda: "PRECONDITION_FAILED" in log.read_text(), timeout=60,
                 what="RabbitMQ to close the channel of the task held past its timeout")
        until_status(slow, RunStatus.COMPLETED, timeout=60)
        wait_for(lambda: "Connection to broker lost" in log.read_text()
                 and worker.poll() is None and "worker: Warm shutdown" not in log.read_text(),
                 timeout=30, what="the worker to connect again")
        after = _onboard("after-the-close")
        until_status(after, RunStatus.COMPLETED, timeout=60)
        assert worker.poll() is None, "the worker stopped after its channel was closed"
    finally:
        stop(worker)
    assert "Unrecoverable error" not in log.read_text()
    # The long step was called once, though its message was handed out again.
    assert Step.objects.get(run=slow, name="create-customer").attempt == 1
    assert Customer.objects.count() == 2
    assert sorted(Counter(Message.objects.values_list("client_reference", flat=True))
                  .values()) == [1, 1]
    call_command("verify_audit")
