"""The bench's no-op task line waits until the tasks it sent are taken, not until the
broker's Redis database holds no unacknowledged message at all: a message another process
left there (a worker killed before it acknowledged) stays until its visibility timeout, and
the bench failed after two minutes saying its own tasks were "not taken in time"."""

import pytest
import redis
from django.conf import settings

from console.celery import app
from runs.bench_in_flight import noop_task_cpu_ms
from runs.bench_processes import Worker
from tests.processes import child_env

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


def test_a_message_left_unacknowledged_by_another_process_is_not_waited_for(tmp_path):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.hset("unacked", "left-by-a-killed-worker", "[]")
    worker = Worker(1, tmp_path, pool="threads", env=child_env())
    try:
        worker.wait_ready()
        ms = noop_task_cpu_ms(worker)
    finally:
        worker.stop()
    assert ms > 0
    assert broker.llen(app.conf.task_default_queue) == 0  # every no-op task taken
    assert broker.hkeys("unacked") == [b"left-by-a-killed-worker"]  # and only theirs awaited
